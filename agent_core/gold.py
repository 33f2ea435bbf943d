"""The committed gold trajectories (assets/swift/gold_trajectories.jsonl.gz), train variations only, as the
agent uses them at run time: worked examples for Sage's grounding prompt, and how many `focus on` actions a
task takes (Gate-1's FOCUS_LIMIT). Never the test variations: nothing here leaks an evaluation answer."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from .actions import is_focus

ROOT = Path(__file__).resolve().parents[1]
GOLD_PACK = ROOT / "assets" / "swift" / "gold_trajectories.jsonl.gz"

_TRAIN: dict[str, list[tuple[int, str, list[str]]]] = {}  # task -> [(variation, description, actions)]


def _load() -> dict[str, list[tuple[int, str, list[str]]]]:
    if not _TRAIN and GOLD_PACK.exists():
        with gzip.open(GOLD_PACK, "rt", encoding="utf-8") as fh:
            for line in fh:
                t = json.loads(line)
                if t["split"] == "train":
                    _TRAIN.setdefault(t["task"], []).append(
                        (t["variation"], t["task_description"], [s["action"] for s in t["steps"]]))
    return _TRAIN


def worked_examples(task: str, exclude_variation: int | None = None, n: int = 1) -> list[tuple[str, list[str]]]:
    """Train gold trajectories of the same task (shortest first), for Sage's grounding prompt."""
    rows = sorted((r for r in _load().get(task, []) if r[0] != exclude_variation), key=lambda r: len(r[2]))
    return [(d, a) for _v, d, a in rows[:n]]


def focus_limit(task: str) -> int | None:
    """The most `focus on` actions any train gold path of the task takes (None when the task has no gold)."""
    rows = _load().get(task)
    if not rows:
        return None
    return max(sum(is_focus(a) for a in actions) for _v, _d, actions in rows)
