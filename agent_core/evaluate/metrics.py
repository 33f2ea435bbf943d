"""The paper's metrics (docs/AGENT.md §8), computed from traces only: per episode, then per task, then
macro-averaged over tasks. Final counts a negative final score as 0; Success is a final score of 100;
Steps@Succ is the mean number of steps of the successful episodes. Task groups Short / Medium / Long
come from the task's gold-path length."""
from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any, Iterable

from ..actions import action_key, verb_of
from ..config import EvalConfig
from ..trace import Episode, LLMCall

SAGE_PURPOSES = ("plan", "focus_review")  # one System-2 call = one of these (a plan is followed by its pick)
GROUPS = ("Short", "Medium", "Long")
# the mechanism table's columns: per-episode counts, averaged over a preset's episodes
MECHANISM_COLUMNS = (
    ("writes_success", "memory writes: success"), ("writes_near-miss", "memory writes: near-miss"),
    ("writes_avoidance", "memory writes: avoidance"), ("writes_plan", "memory writes: plan"),
    ("T1", "T1 retrievals"), ("T4", "T4 retrievals"),
    ("inject_swift", "injections into Swift"), ("inject_sage", "injections into Sage"),
    ("inject_critic", "memory evidence to the Critic"),
    ("stagnation_reports", "stagnation reports"), ("critic_calls", "Critic calls"),
    ("gate1_checks", "Gate-1 decisions"), ("gate1_drops", "Gate-1 drops"), ("gate1_repairs", "Gate-1 repairs"),
    ("system1_calls", "System-1 (Swift) calls"), ("system2_calls", "System-2 (Sage) calls"),
    ("share_swift", "share of actions from Swift"), ("share_buffer", "share of actions from the buffer"),
    ("unknown_action_plays", "plays the game did not know (\"No known action\")"),
)
UNKNOWN_ACTION = "No known action matches that input"  # ScienceWorld's answer to an action naming nothing in view


def llm_failure(call: LLMCall) -> str:
    """A failed LLM call as `timeout` or `other`: its recorded kind, or, in a trace from before the kind was
    recorded, what its message says (LLMCall.failure)."""
    return "timeout" if call.failure() == "timeout" else "other"


def pick_position(option: int | None) -> str:
    """Where Sage's pick stood in the list it was shown ("3": third), or "own" for a command not in the list."""
    return str(option) if option else "own"


def shown_position(rec, pick) -> str:
    """Where Sage's pick stood in the list as the model read it: scored options are shown in alphabetical order
    (Sage.score_messages), so the position there, not in the internal list; a generated pick answered the list as
    numbered (`pick.option`)."""
    scored = next((d for d in rec.decisions if d.kind == "option_scores" and d.purpose == "ground"), None)
    if scored is not None and pick.option:
        shown = sorted(scored.options, key=action_key)
        keys = [action_key(o) for o in shown]
        if action_key(pick.action) in keys:
            return str(keys.index(action_key(pick.action)) + 1)
    return pick_position(pick.option)


def pick_bias(steps) -> Counter:
    """What Sage's scored picks follow: how often the pick is a `move ...` (against the share of `move` options
    offered), the longest option (against the chance of a pick at random), Swift's own top choice (against chance)."""
    out: Counter = Counter()
    for r in steps:
        scored = next((d for d in r.decisions if d.kind == "option_scores" and d.purpose == "ground"), None)
        pick = next((d for d in r.decisions if d.kind == "sage_pick"), None)
        if scored is None or pick is None or not scored.options:
            continue
        opts = scored.options
        n = len(opts)
        longest = max(len(o) for o in opts)
        top = r.swift_valid_ranked[0].action if r.swift_valid_ranked else None
        out["picks"] += 1
        out["move"] += verb_of(pick.action) == "move"
        out["move_offered"] += sum(verb_of(o) == "move" for o in opts) / n
        out["longest"] += len(pick.action) == longest
        out["longest_chance"] += sum(len(o) == longest for o in opts) / n
        if top is not None and any(action_key(o) == action_key(top) for o in opts):
            out["swift_top_offered"] += 1
            out["swift_top"] += action_key(pick.action) == action_key(top)
            out["swift_top_chance"] += 1 / n
    return out


def episode_metrics(ep: Episode) -> dict[str, Any]:
    """One row per episode: outcome plus mechanism activity, from the step records."""
    h, steps, s = ep.header, ep.steps, ep.summary
    last = steps[-1] if steps else None
    raw = s.final_score if s else (last.score if last else 0.0)
    writes = Counter(w.tag for r in steps for w in r.memories_written if w.id and not w.error and not w.duplicate_of)
    triggers = Counter(x.trigger for r in steps for x in r.retrievals)
    inject = Counter(x.injected_into for r in steps for x in r.retrievals if x.injected_into and x.injected_ids)
    modes = Counter(m for r in steps if r.stagnation for m in r.stagnation.modes)
    critic = Counter(r.critic.status for r in steps if r.critic)
    decisions = Counter(d.kind for r in steps for d in r.decisions if d.kind not in ("note", "focus_margin"))
    drops = Counter(g.reason for r in steps for g in r.gate1 if g.decision == "DROP")
    repairs = Counter(g.reason for r in steps for g in r.gate1 if g.decision == "REPAIR")
    systems = Counter(r.system for r in steps)
    calls = Counter(c.purpose for r in steps for c in r.llm_calls)
    llm_errors = sum(1 for r in steps for c in r.llm_calls if c.error)
    failures = Counter(llm_failure(c) for r in steps for c in r.llm_calls if c.error)
    picks = Counter(shown_position(r, d) for r in steps for d in r.decisions if d.kind == "sage_pick")
    n = len(steps)
    row: dict[str, Any] = {
        "preset": (h.config or {}).get("preset", "") if isinstance(h.config, dict) else "",
        "task": h.task, "task_index": h.task_index, "variation": h.variation,
        "final": max(0.0, raw), "raw_final": raw, "success": raw >= 100, "steps": n,
        "reason": s.reason if s else "interrupted", "error": s.error if s else None,
        "trace": str(ep.path),
        "writes": dict(writes), "triggers": dict(triggers), "injections": dict(inject),
        "stagnation_modes": dict(modes), "critic": dict(critic), "gate1_drops": dict(drops),
        "decisions": dict(decisions), "code": dict(h.code), "config_hash": h.config_hash, "run_id": h.run_id,
        "machine": dict(h.machine or {}),
        "gate1_repairs": dict(repairs), "systems": dict(systems), "llm_calls": dict(calls),
        "llm_errors": llm_errors, "llm_failures": dict(failures), "sage_picks": dict(picks),
        "sage_pick_bias": {k: round(v, 4) for k, v in pick_bias(steps).items()},
        "seconds": round(sum(r.timings.get("total", 0.0) for r in steps), 3),
        "sage_seconds": round(sum(r.timings.get("sage", 0.0) for r in steps), 3),
    }
    flat = {f"writes_{k}": writes.get(k, 0) for k in ("success", "near-miss", "avoidance", "plan", "insight")}
    flat.update({"T1": triggers.get("T1", 0), "T2": triggers.get("T2", 0), "T3": triggers.get("T3", 0),
                 "T4": triggers.get("T4", 0),
                 "inject_swift": inject.get("swift", 0), "inject_sage": inject.get("sage", 0),
                 "inject_critic": inject.get("critic", 0),
                 "stagnation_reports": sum(1 for r in steps if r.stagnation),
                 "critic_calls": critic.get("called", 0) + critic.get("failed", 0),
                 "gate1_checks": sum(len(r.gate1) for r in steps), "gate1_drops": sum(drops.values()), "gate1_repairs": sum(repairs.values()),
                 "system1_calls": sum(1 for r in steps if "swift" in r.timings),
                 "system2_calls": sum(calls.get(p, 0) for p in SAGE_PURPOSES),
                 "share_swift": systems.get("swift", 0) / n if n else 0.0,
                 "share_buffer": (systems.get("sage", 0) + systems.get("critic", 0)) / n if n else 0.0,
                 "unknown_action_plays": sum(1 for r in steps if r.observation.startswith(UNKNOWN_ACTION))})
    row["activity"] = flat
    return row


def group_of(gold_length: float, ev: EvalConfig | None = None) -> str:
    ev = ev or EvalConfig()
    if gold_length is None or (isinstance(gold_length, float) and math.isnan(gold_length)):
        return "Medium"
    return "Short" if gold_length <= ev.short_max_gold_len else "Medium" if gold_length <= ev.medium_max_gold_len \
        else "Long"


def _macro(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per task, then the mean over tasks."""
    per_task: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        per_task.setdefault(r["task"], []).append(r)
    finals, succs, steps_succ, table = [], [], [], {}
    for task, rs in per_task.items():
        f = statistics.mean(r["final"] for r in rs)
        sr = statistics.mean(1.0 if r["success"] else 0.0 for r in rs)
        ss = [r["steps"] for r in rs if r["success"]]
        finals.append(f)
        succs.append(sr)
        if ss:
            steps_succ.append(statistics.mean(ss))
        table[task] = {"episodes": len(rs), "final": round(f, 4), "success": round(sr, 4),
                       "steps_at_success": round(statistics.mean(ss), 4) if ss else None,
                       "task_index": rs[0]["task_index"]}
    return {"tasks": len(per_task), "episodes": len(rows),
            "final": round(statistics.mean(finals), 4) if finals else 0.0,
            "success": round(statistics.mean(succs), 4) if succs else 0.0,
            "steps_at_success": round(statistics.mean(steps_succ), 4) if steps_succ else None,
            "successes": sum(1 for r in rows if r["success"]),
            "ended_negative": sum(1 for r in rows if r["raw_final"] < 0),
            "per_task": dict(sorted(table.items(), key=lambda kv: kv[1]["task_index"]))}


def aggregate(rows: Iterable[dict[str, Any]], gold_lengths: dict[str, float],
              ev: EvalConfig | None = None) -> dict[str, Any]:
    """preset -> Table 1 numbers, per-task table, groups, mechanism activity (means per episode), errors."""
    by_preset: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_preset.setdefault(r["preset"], []).append(r)
    out: dict[str, Any] = {}
    for p, rs in by_preset.items():
        ok = [r for r in rs if r["reason"] != "error"]
        m = _macro(ok)
        groups = {}
        for g in GROUPS:
            sub = [r for r in ok if group_of(gold_lengths.get(r["task"], float("nan")), ev) == g]
            if sub:
                gm = _macro(sub)
                groups[g] = {k: gm[k] for k in ("tasks", "episodes", "final", "success", "steps_at_success")}
        keys = sorted({k for r in ok for k in r["activity"]})
        activity = {k: round(statistics.mean(r["activity"].get(k, 0) for r in ok), 4) for k in keys} if ok else {}
        detail: dict[str, Counter] = {name: Counter() for name in ("gate1_drops", "stagnation_modes", "critic",
                                                                   "writes", "triggers", "llm_calls",
                                                                   "llm_failures", "sage_picks",
                                                                   "sage_pick_bias")}
        for r in ok:
            for name, c in detail.items():
                c.update(r.get(name, {}))
        out[p] = {**m, "groups": groups, "activity": activity,
                  "totals": {k: {x: round(y, 4) for x, y in v.most_common()} for k, v in detail.items()},
                  "errors": [{"task": r["task"], "variation": r["variation"], "error": r["error"]}
                             for r in rs if r["reason"] == "error"],
                  "steps_total": sum(r["steps"] for r in ok),
                  "episode_seconds": round(sum(r["seconds"] for r in ok), 1)}
    return out


def comparable(results: dict[str, Any]) -> dict[str, Any]:
    """The part of results.json that must be identical between two runs of the same evaluation (no
    timings, no paths): used by the tests and by `--check-against`."""
    out = {}
    for p, m in results.get("presets", {}).items():
        out[p] = {k: m[k] for k in ("final", "success", "steps_at_success", "successes", "episodes", "per_task",
                                    "groups")}
        out[p]["activity"] = {k: v for k, v in m["activity"].items()}
    return out
