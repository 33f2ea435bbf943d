"""Paired comparison of presets, with attribution: a claim that a mechanism helps is a difference measured on the
same task-variations (the same start, the same objects), never two averages over different episodes.

For each preset against a reference (Baseline): the mean paired difference in Final with its 95% t-interval, how
many pairs diverged (took a different action somewhere), and for each divergent pair the first step where the two
episodes part and what the preset's record says decided that step (a Gate-1 drop, a Critic call, a memory
injection, Sage's pick, ...). Whether that decision was a design rule (the code decided: Gate-1, T1's replacement,
the safeguard, a trigger) or a model's choice (Sage, the Critic, Swift reading memory) is part of the row, so a loss
charged to a rule points at code to fix. A Gate-1 drop of an action that the reference played at that step and the
game rejected ("No known action matches that input"), or took without changing anything (the same score, room text
and inventory after it as before: a focus taken a second time), is its own kind, `saved`: the rule spared a step
the game would have wasted, which is what it is for, and the two episodes then part by what the agents did next in
the same world.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from ..actions import action_key
from ..provenance import same_machine_kind
from ..trace import StepRecord, read_episode

RULE, MODEL, SAVED = "rule", "model", "saved"


@dataclass
class Interval:
    n: int
    mean: float
    sd: float
    low: float
    high: float

    @property
    def excludes_zero(self) -> bool:
        return self.n > 1 and (self.low > 0 or self.high < 0)


def t_interval(diffs: Sequence[float], level: float = 0.95) -> Interval:
    """The mean of paired differences and its two-sided t-interval (n - 1 degrees of freedom)."""
    n = len(diffs)
    if n == 0:
        return Interval(0, 0.0, 0.0, 0.0, 0.0)
    mean = statistics.fmean(diffs)
    if n == 1:
        return Interval(1, mean, 0.0, -math.inf, math.inf)
    sd = statistics.stdev(diffs)
    from scipy.stats import t

    half = float(t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return Interval(n, round(mean, 4), round(sd, 4), round(mean - half, 4), round(mean + half, 4))


def first_divergence(a: Sequence[StepRecord], b: Sequence[StepRecord]) -> int | None:
    """The first step (1-based) where the two took different actions (after normalisation) or saw different
    observations, or one ended; None when they are the same throughout."""
    for i in range(max(len(a), len(b))):
        if i >= len(a) or i >= len(b):
            return i + 1
        if action_key(a[i].action) != action_key(b[i].action) or a[i].observation.strip() != b[i].observation.strip():
            return i + 1
    return None


@dataclass
class Attribution:
    mechanism: str  # gate1:R | gate1-saved:R | critic | sage_pick | focus_review | memory_swift | memory_sage | ...
    kind: str  # rule | model | saved (a rule dropped what the game rejected in the reference)
    detail: str


def wasted(ref: StepRecord, ref_before: StepRecord | None) -> str:
    """Why the reference's step changed nothing in the game, or "": the game rejected the action, or took it and
    its score, room text and inventory are what they were before (`ref_before`: the reference's previous step)."""
    if ref.action_valid is False:
        return "the game rejected it"
    if (ref_before is not None and not ref.done and ref.score == ref_before.score
            and ref.look.strip() == ref_before.look.strip() and ref.inventory.strip() == ref_before.inventory.strip()):
        return "the game took it and nothing changed (the same score, room and inventory)"
    return ""


def attribute(rec: StepRecord, ref: StepRecord | None, ref_before: StepRecord | None = None) -> Attribution:
    """What in the preset's record `rec` made it act differently from the reference's record at the same step
    (both had the same past; `ref_before` is the reference's step before, None at the first). The first of: the
    safeguard, a Gate-1 drop, T1's replacement, the Critic, a focus review, a Sage pick (with or without memory
    hints), a menu answer, a trigger that Baseline lacked."""
    kinds = {d.kind: d for d in rec.decisions}
    if "safeguard" in kinds:
        return Attribution("safeguard", RULE, kinds["safeguard"].describe())
    drops = [g for g in rec.gate1 if g.decision == "DROP" and g.source in ("swift", "sage")]
    if drops and (ref is None or action_key(rec.action) != action_key(drops[0].proposed)):
        g = drops[0]
        why = wasted(ref, ref_before) if ref is not None and action_key(ref.action) == action_key(g.proposed) else ""
        if why:
            return Attribution(f"gate1-saved:{g.reason}", SAVED,
                               f"Gate-1 dropped {g.source}'s '{g.proposed}' ({g.reason}); the reference played it and "
                               f"{why}: a step saved, then each agent chose its own next action")
        return Attribution(f"gate1:{g.reason}", RULE, f"Gate-1 dropped {g.source}'s '{g.proposed}' ({g.reason})")
    t1 = kinds.get("t1_retry")
    if t1 is not None and t1.valid and not getattr(t1, "outside_top_k", 0):
        return Attribution("memory_swift", MODEL, t1.describe())
    if rec.system == "critic" or (rec.critic is not None and rec.critic.status == "called"):
        return Attribution("critic", MODEL, f"the Critic's actions: {', '.join(rec.critic.admitted or [])}"
                           if rec.critic else "an action from the Critic's buffer")
    sage_calls = [c.purpose for c in rec.llm_calls]
    if "focus_review" in sage_calls:
        return Attribution("focus_review", MODEL, f"Sage reviewed a focus and chose '{rec.action}'")
    if "plan" in sage_calls or rec.system == "sage":
        hinted = any(x.trigger == "T4" and x.injected_into == "sage" for x in rec.retrievals)
        ref_sage = ref is not None and any(c.purpose == "plan" for c in ref.llm_calls)
        if hinted:
            return Attribution("memory_sage", MODEL, f"Sage planned with memory hints (T4) and chose '{rec.action}'")
        if not ref_sage and rec.trigger is not None:
            return Attribution(f"trigger:{rec.trigger.name}", RULE, f"'{rec.trigger.name}' called Sage "
                                                                    f"({rec.trigger.rule}); the reference's Swift acted")
        return Attribution("sage_pick", MODEL, f"Sage chose '{rec.action}'")
    if rec.menu is not None:
        return Attribution("menu", RULE, f"the ambiguity menu was answered with option {rec.menu.chosen}")
    if rec.retrievals and any(x.injected_into == "swift" for x in rec.retrievals):
        return Attribution("memory_swift", MODEL, "Swift's retry with memory")
    if "loop_guard" in kinds:
        return Attribution("loop_guard", RULE, kinds["loop_guard"].describe())
    if ref is not None and ref.system in ("sage", "critic") and rec.system == "swift":
        return Attribution("swift_instead", RULE, f"the reference took '{ref.action}' from {ref.system}; here Swift "
                                                  f"acted ({rec.trigger.name if rec.trigger else 'no trigger'})")
    return Attribution("other", MODEL, f"'{rec.action}' (no mechanism record at this step)")


@dataclass
class PairRow:
    task: str
    variation: int
    final_ref: float
    final: float
    diff: float
    diverged_at: int | None
    mechanism: str = ""
    kind: str = ""
    detail: str = ""
    trace: str = ""
    trace_ref: str = ""


@dataclass
class PresetPairs:
    preset: str
    reference: str
    interval: Interval
    diverged: int
    rows: list[PairRow] = field(default_factory=list)
    by_mechanism: dict[str, dict[str, float]] = field(default_factory=dict)  # mechanism -> pairs, total change
    rule_losses: int = 0  # pairs that lost Final where a design rule decided the first divergent step
    saved_losses: int = 0  # pairs that lost Final after a drop of what the game rejected in the reference (not a harm)
    # pairs whose two episodes were played on different kinds of machine (CPU or vector instructions): there the
    # difference mixes the mechanism with the machine's rounding; and pairs where a trace predates that record
    across_machines: int = 0
    machine_unknown: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["interval"]["excludes_zero"] = self.interval.excludes_zero
        return out


def compare(rows: list[dict[str, Any]], preset: str, reference: str = "baseline",
            read=read_episode) -> PresetPairs:
    """`rows` are evaluation metrics rows (agent_core.evaluate.metrics.episode_metrics) with their trace paths."""
    ref = {(r["task"], r["variation"]): r for r in rows if r["preset"] == reference}
    mine = {(r["task"], r["variation"]): r for r in rows if r["preset"] == preset}
    keys = sorted(set(ref) & set(mine), key=lambda k: (mine[k]["task_index"], k[1]))
    out_rows: list[PairRow] = []
    for k in keys:
        a, b = mine[k], ref[k]
        row = PairRow(task=k[0], variation=k[1], final_ref=b["final"], final=a["final"],
                      diff=round(a["final"] - b["final"], 4), diverged_at=None, trace=a["trace"], trace_ref=b["trace"])
        try:
            ea, eb = read(a["trace"]), read(b["trace"])
        except Exception as e:  # noqa: BLE001 - an unreadable trace is reported, not fatal
            row.mechanism, row.kind, row.detail = "unreadable", "", f"{type(e).__name__}: {e}"
            out_rows.append(row)
            continue
        at = first_divergence(ea.steps, eb.steps)
        row.diverged_at = at
        if at is not None and at <= len(ea.steps):
            why = attribute(ea.steps[at - 1], eb.steps[at - 1] if at <= len(eb.steps) else None,
                            eb.steps[at - 2] if 1 < at <= len(eb.steps) + 1 else None)
            row.mechanism, row.kind, row.detail = why.mechanism, why.kind, why.detail
        elif at is not None:
            row.mechanism, row.kind, row.detail = "ended", "", "the preset's episode ended earlier"
        out_rows.append(row)
    interval = t_interval([r.diff for r in out_rows])
    by: dict[str, dict[str, float]] = {}
    for r in out_rows:
        if r.diverged_at is None:
            continue
        m = by.setdefault(r.mechanism, {"pairs": 0, "gained": 0, "lost": 0, "change": 0.0, "kind": r.kind})
        m["pairs"] += 1
        m["gained"] += r.diff > 0
        m["lost"] += r.diff < 0
        m["change"] = round(m["change"] + r.diff, 4)
    machines = [(mine[k].get("machine") or {}, ref[k].get("machine") or {}) for k in keys]
    return PresetPairs(preset=preset, reference=reference, interval=interval,
                       across_machines=sum(1 for a, b in machines if a and b and not same_machine_kind(a, b)),
                       machine_unknown=sum(1 for a, b in machines if not a or not b),
                       diverged=sum(1 for r in out_rows if r.diverged_at is not None), rows=out_rows,
                       by_mechanism=dict(sorted(by.items(), key=lambda kv: kv[1]["change"])),
                       rule_losses=sum(1 for r in out_rows if r.kind == RULE and r.diff < 0),
                       saved_losses=sum(1 for r in out_rows if r.kind == SAVED and r.diff < 0))


def paired_section(rows: list[dict[str, Any]], order: list[str], reference: str | None = None) -> dict[str, Any]:
    """results.json's `paired`: every preset against the reference (Baseline; Swift alone for the LLM-free
    presets), when the reference ran."""
    reference = reference or next((r for r in ("baseline", "swift") if r in order), "")
    if reference not in order:
        return {}
    return {p: compare(rows, p, reference).to_dict() for p in order if p != reference}


__all__ = ["Attribution", "Interval", "PairRow", "PresetPairs", "attribute", "compare", "first_divergence",
           "paired_section", "t_interval"]
