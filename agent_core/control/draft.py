"""What one step collects while it decides (`StepDraft`), before it becomes a StepRecord."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..decisions import Decision
from ..swift.model import SwiftProposal
from ..trace import CriticCall, Gate1Decision, MemoryRetrieval, MemoryWrite, MenuChoice, Trigger


@dataclass
class StepDraft:
    """What one step collects before it becomes a StepRecord."""

    step: int
    gate1: list[Gate1Decision] = field(default_factory=list)
    mappings: list = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)  # typed; the record's notes are their texts
    llm_calls: list = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    trigger: Trigger | None = None
    prop: SwiftProposal | None = None
    menu: MenuChoice | None = None
    critic: CriticCall | None = None
    buffer_before: list[str] = field(default_factory=list)
    drops: int = 0
    sage_called: bool = False
    retrievals: list[MemoryRetrieval] = field(default_factory=list)
    writes: list[MemoryWrite] = field(default_factory=list)
    sage_unnamed: list[str] | None = None  # focus targets the task does not name, once Sage needed them
    refused: list[str] = field(default_factory=list)  # buffered commands that landed on one of them

    def emit(self, d: Decision) -> None:
        self.decisions.append(d)


@contextmanager
def timed(w: StepDraft, part: str):
    """Add the time spent inside to the step's timing of `part` (a part can run several times in a step)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        w.timings[part] = w.timings.get(part, 0.0) + time.perf_counter() - t0


class LazyEmbedder:
    """Loads the sentence embedder only when Gate-1 or the mapping actually needs a similarity."""

    def __init__(self, get):
        self._get = get

    def encode(self, texts, exact: bool = False):
        return self._get().encode(texts, exact=exact)
