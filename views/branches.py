"""Roads not taken, in words and lines, from records and rollouts only (no Streamlit): which alternatives a step's
record offers, the rollouts already made for them, one plain sentence each, and what a score chart draws. The Run
page's panel (views.roads) and the offline export (views.export) share it."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from agent_core.actions import action_key
from agent_core.rollout import DEFAULT_HORIZON, Rollout, find_rollouts
from agent_core.trace import StepRecord
from agent_core.trace.io import ROLLOUTS
from views import sources

MAX_ALTERNATIVES = 5
PLAYED = "the action played"


def rollout_dirs() -> list[Path]:
    """Where rollouts are looked for: this app's cache (beside its runs) and the examples' shipped branches."""
    return [sources.runs_dir() / ROLLOUTS, sources.examples_dir() / ROLLOUTS]


def candidates(rec: StepRecord) -> list[tuple[str, str | None]]:
    """(who proposed it, action) for the step's action and up to five alternatives, from its record; None: what
    Swift alone plays there (its choice in the continuation's own words)."""
    out: list[tuple[str, str | None]] = [(PLAYED, rec.action)]
    seen = {action_key(rec.action)}

    def add(label: str, action: str | None) -> None:
        if len(out) > MAX_ALTERNATIVES:
            return
        if action is None:
            if any(a is None for _l, a in out):
                return
        elif not action.strip() or action_key(action) in seen:
            return
        else:
            seen.add(action_key(action))
        out.append((label, action))

    if rec.system != "swift":
        add("Swift's own choice", None)
    for g in rec.gate1:
        if g.decision == "DROP":
            add("the action Gate-1 dropped", g.proposed)
    scored = next((d for d in rec.decisions if d.kind == "option_scores" and d.purpose == "ground"), None)
    swift = [c.action for c in rec.swift_valid_ranked]
    sage = list(scored.options) if scored is not None else []
    for i in range(max(len(swift), len(sage))):  # Swift's and Sage's best, alternately
        if i < len(swift):
            add("Swift's next candidate" if i else "Swift's best valid action", swift[i])
        if i < len(sage):
            add("Sage's best-scored option" if not i else "Sage's next-scored option", sage[i])
    return out


def sentence(label: str, r: Rollout, played: Rollout | None, step: int) -> str:
    """One plain sentence for a branch, against the action played under the same continuation."""
    who = "Swift alone" if r.request.policy == "swift" else "the episode's own preset"
    end = {"success": " (the task is done)", "failure": " (the game is lost)"}.get(r.ended, "")
    if label.startswith(PLAYED):
        return (f"With the action played, '{r.first_action}', at step {step} and {who} playing on, the score is "
                f"{r.final:g} by step {r.end_step}{end}.")
    head = f"Had {label}, '{r.first_action}', been played at step {step}"
    if played is None:
        return f"{head}, the score would be {r.final:g} by step {r.end_step}{end}, with {who} playing on."
    if played.final == r.final and played.end_step == r.end_step:
        return f"{head}, the score would be the same, {r.final:g} by step {r.end_step}, with {who} playing on."
    if played.end_step == r.end_step:
        return (f"{head}, the score would be {r.final:g} by step {r.end_step}{end} instead of {played.final:g} "
                f"({who} playing on after either).")
    return (f"{head}, the score would be {r.final:g} by step {r.end_step}{end}; after the action played it is "
            f"{played.final:g} by step {played.end_step} ({who} playing on after either).")


def branches_at(ep, k: int, policy: str = "swift", horizon: int = DEFAULT_HORIZON,
                dirs: Iterable[Path] | None = None) -> list[Rollout]:
    return find_rollouts(dirs if dirs is not None else rollout_dirs(), ep, step=k, policy=policy, horizon=horizon)


def match(cands: list[tuple[str, str | None]], found: list[Rollout]) -> list[tuple[str, str | None, Rollout | None]]:
    by_action = {(action_key(r.request.action) if r.request.action else None): r for r in found}
    return [(label, a, by_action.get(action_key(a) if a else None)) for label, a in cands]


def labelled(rec: StepRecord, found: list[Rollout]) -> list[tuple[str, str | None, Rollout | None]]:
    """The step's candidates matched with their rollouts; the continuation's own choice, once played out, is
    folded into the candidate that names the same action ("Swift's best valid action (Swift alone's choice)")."""
    rows = match(candidates(rec), found)
    own = next((r for _l, a, r in rows if a is None and r is not None), None)
    if own is not None:
        for i, (label, a, r) in enumerate(rows):
            if a is not None and action_key(a) == action_key(own.first_action):
                rows[i] = (f"{label} (also Swift alone's own choice)", a, r)
                rows = [x for x in rows if x[1] is not None or x[2] is not own]
                break
    return rows


def episode_branches(ep, dirs: Iterable[Path] | None = None) -> dict[int, list[tuple[str, Rollout]]]:
    """Every step's rollouts already made, as {step shown: [(label, rollout)]} (the played action first)."""
    found = find_rollouts(dirs if dirs is not None else rollout_dirs(), ep, policy="swift", horizon=DEFAULT_HORIZON)
    out: dict[int, list[tuple[str, Rollout]]] = {}
    for k in sorted({r.request.step for r in found}):
        if k >= len(ep.steps):
            continue
        rows = labelled(ep.steps[k], [r for r in found if r.request.step == k])
        drawn = [(label, r) for label, _a, r in rows if r is not None]
        if drawn:
            out[k + 1] = drawn
    return out


def sentences(drawn: list[tuple[str, Rollout]], step: int) -> list[str]:
    played = next((r for label, r in drawn if label.startswith(PLAYED)), None)
    return [sentence(label, r, played, step) for label, r in drawn]


def branch_traces(drawn: list[tuple[str, Rollout]]) -> list[dict[str, Any]]:
    """What the score chart draws of each branch: its label, where it starts and its scores."""
    return [{"label": f"{label}: {r.first_action}", "played": label.startswith(PLAYED), "step": r.request.step,
             "start": r.start_score, "scores": list(r.scores)} for label, r in drawn]


