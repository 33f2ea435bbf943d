"""Search inside one episode: the steps whose action or observation holds some text, or whose record holds a kind
of decision ("Gate-1 drop", "Critic", ...). Pure functions over step records; the Run page's sidebar asks, marks
the hits on the timeline and jumps between them."""
from __future__ import annotations

from typing import Callable

from agent_core.trace import StepRecord
from views.narration import WHY

KINDS: dict[str, Callable[[StepRecord], bool]] = {
    "Sage called": lambda r: r.trigger is not None and r.trigger.name in WHY,
    "Gate-1 drop": lambda r: any(g.decision == "DROP" for g in r.gate1),
    "Gate-1 repair": lambda r: any(g.decision == "REPAIR" for g in r.gate1),
    "Stagnation report": lambda r: r.stagnation is not None,
    "Critic": lambda r: r.critic is not None,
    "Memory used": lambda r: any(x.injected_ids for x in r.retrievals),
    "Memory written": lambda r: any(w.id and not w.error for w in r.memories_written),
    "Menu answered": lambda r: r.menu is not None,
    "Model call failed": lambda r: any(c.error for c in r.llm_calls),
    "Not accepted by the game": lambda r: r.action_valid is False,
    "Points earned": lambda r: r.reward > 0,
    "Points lost": lambda r: r.reward < 0,
}


def search(records: list[StepRecord], text: str = "", kinds: tuple[str, ...] | list[str] = ()) -> list[int]:
    """The steps that match: the text (case-insensitive, in the action or the observation) and any of the kinds.
    Nothing asked: no hits."""
    needle = " ".join(text.lower().split())
    tests = [KINDS[k] for k in kinds if k in KINDS]
    if not needle and not tests:
        return []
    hits = []
    for r in records:
        if needle and needle not in " ".join(f"{r.action} {r.observation}".lower().split()):
            continue
        if tests and not any(t(r) for t in tests):
            continue
        hits.append(r.step)
    return hits


def next_hit(hits: list[int], t: int, forward: bool = True) -> int | None:
    """The hit after (or before) step t, wrapping around; None without hits."""
    if not hits:
        return None
    if forward:
        return next((h for h in hits if h > t), hits[0])
    return next((h for h in reversed(hits) if h < t), hits[-1])
