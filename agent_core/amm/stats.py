"""What the summary and the Evaluate page count of an episode's memory use, from its step records."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..trace import StepRecord


@dataclass
class EpisodeMemoryStats:
    """What the summary and the Evaluate page count per episode, counted from the step records."""

    writes: dict[str, int] = field(default_factory=dict)  # by tag
    triggers: dict[str, int] = field(default_factory=dict)  # T1..T4, critic
    injections: dict[str, int] = field(default_factory=dict)  # swift / sage / critic
    errors: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"writes": dict(self.writes), "triggers": dict(self.triggers), "injections": dict(self.injections),
                "errors": self.errors}

    @classmethod
    def from_records(cls, steps: Sequence[StepRecord], at_start: dict[str, Any] | None = None) -> "EpisodeMemoryStats":
        """The same counts whether the episode ran at once or was resumed: they come from the trace."""
        out = cls(errors=1 if (at_start or {}).get("error") else 0)
        for rec in steps:
            if rec.replayed:  # a fork's copies of its parent's steps: the parent counted them
                continue
            for w in rec.memories_written:
                if w.error:
                    out.errors += 1
                elif w.id and not w.duplicate_of:
                    _bump(out.writes, w.tag)
            for r in rec.retrievals:
                _bump(out.triggers, r.trigger)
                if r.error and r.error.startswith("retrieval failed"):
                    out.errors += 1
                if r.injected_into:
                    _bump(out.injections, r.injected_into)
        return out


def _bump(d: dict[str, int], key: str) -> None:
    d[key] = d.get(key, 0) + 1
