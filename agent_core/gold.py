"""The committed gold trajectories (assets/swift/gold_trajectories.jsonl.gz), train variations only, as the
agent uses them at run time: worked examples for Sage's grounding prompt, and how many `focus on` actions a
task takes (Gate-1's FOCUS_LIMIT). Never the test variations: nothing here leaks an evaluation answer."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from .actions import argument_of, canonical, is_focus

ROOT = Path(__file__).resolve().parents[1]
GOLD_PACK = ROOT / "assets" / "swift" / "gold_trajectories.jsonl.gz"


@dataclass(frozen=True)
class GoldRun:
    variation: int
    description: str
    actions: list[str]
    # each `focus on` of the path: (its object, the room and inventory text just before it)
    focus: list[tuple[str, str]]
    focus_unrewarded: int = 0  # of those, the ones the score did not rise on (grow-fruit's focus on the fruit)


_TRAIN: dict[str, list[GoldRun]] = {}  # task -> its train gold paths


def train_gold() -> dict[str, list[GoldRun]]:
    if not _TRAIN and GOLD_PACK.exists():
        with gzip.open(GOLD_PACK, "rt", encoding="utf-8") as fh:
            for line in fh:
                t = json.loads(line)
                if t["split"] != "train":
                    continue
                context, focus = t["start_look"] + "\n" + t["start_inventory"], []
                score, unrewarded = 0.0, 0
                for s in t["steps"]:
                    if is_focus(s["action"]):
                        focus.append((argument_of(canonical(s["action"])), context))
                        unrewarded += s.get("score", score) <= score
                    context, score = s["look"] + "\n" + s.get("inventory", ""), s.get("score", score)
                _TRAIN.setdefault(t["task"], []).append(GoldRun(
                    int(t["variation"]), t["task_description"], [s["action"] for s in t["steps"]], focus,
                    unrewarded))
    return _TRAIN


def worked_examples(task: str, exclude_variation: int | None = None, n: int = 1) -> list[tuple[str, list[str]]]:
    """Train gold trajectories of the same task (shortest first), for Sage's grounding prompt."""
    rows = sorted((r for r in train_gold().get(task, []) if r.variation != exclude_variation),
                  key=lambda r: len(r.actions))
    return [(r.description, r.actions) for r in rows[:n]]


def focus_limit(task: str) -> int | None:
    """The most `focus on` actions any train gold path of the task takes (None when the task has no gold)."""
    rows = train_gold().get(task)
    if not rows:
        return None
    return max(len(r.focus) for r in rows)


def focus_unrewarded_limit(task: str) -> int:
    """The most `focus on` actions any train gold path of the task takes without a reward (0 for most tasks): an
    unrewarded focus beyond these was not one of the task's focuses (FOCUS_LIMIT does not count it)."""
    return max((r.focus_unrewarded for r in train_gold().get(task, [])), default=0)
