"""Two episodes side by side, from their step records only: where they part, their score trajectories,
and what each mechanism did in each (the Compare page and the Evaluate page use these)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from agent_core.actions import action_key
from agent_core.evaluate.metrics import MECHANISM_COLUMNS, episode_metrics
from agent_core.trace import Episode, StepRecord

from .common import actor_label, html_text, md_code, md_text

COLORS = ("#1f77b4", "#d62728")  # A, B (the actor colours stay inside the step lists)


@dataclass
class Alignment:
    rows: list[dict[str, Any]]  # one per step index, both sides
    first_divergence: int | None  # the first step whose action (normalized) or observation differs; None: none
    fork_step: int | None  # B is a fork of A: the steps up to here were replayed, not chosen


def fork_step(a: Episode, b: Episode) -> int | None:
    """B's fork step when B was forked from A (by file or run id), else None."""
    par = b.header.parent or {}
    if not par:
        return None
    same_file = str(par.get("trace", "")).endswith(a.path.name)
    if same_file or (par.get("run_id") and par.get("run_id") == a.header.run_id):
        return int(par.get("step", 0))
    return None


def align(a: Episode, b: Episode) -> Alignment:
    """Step i of A next to step i of B; the first divergence uses the one normalisation of action text."""
    n = max(len(a.steps), len(b.steps))
    first = None
    rows = []
    for i in range(n):
        ra = a.steps[i] if i < len(a.steps) else None
        rb = b.steps[i] if i < len(b.steps) else None
        same = (ra is not None and rb is not None and action_key(ra.action) == action_key(rb.action)
                and ra.observation.strip() == rb.observation.strip())
        if not same and first is None:
            first = i + 1
        ended = "(ended)"  # a side that has no step i: said in words, never a raw None
        rows.append({"step": i + 1, "same": same,
                     "A who": actor_label(ra.system) if ra else "", "A action": ra.action if ra else ended,
                     "A score": f"{ra.score:g}" if ra else "",
                     "B who": actor_label(rb.system) + (" (replayed)" if rb.replayed else "") if rb else "",
                     "B action": rb.action if rb else ended, "B score": f"{rb.score:g}" if rb else ""})
    return Alignment(rows=rows, first_divergence=first, fork_step=fork_step(a, b))


def _line(fig: go.Figure, steps: list[StepRecord], name: str, color: str, dash: str | None = None) -> None:
    fig.add_scatter(x=[0] + [r.step for r in steps], y=[0.0] + [r.score for r in steps], mode="lines+markers",
                    name=name, line={"color": color, "width": 2, "dash": dash}, marker={"size": 5},
                    hovertext=["start"] + [f"{html_text(name)} step {r.step}: {r.score:g}<br>{html_text(r.action[:60])}"
                                           for r in steps],  # Plotly renders hover text as HTML
                    hoverinfo="text")


def score_overlay(a: Episode, b: Episode, names: tuple[str, str] = ("A", "B"),
                  al: Alignment | None = None) -> go.Figure:
    al = al or align(a, b)
    fig = go.Figure()
    _line(fig, a.steps, names[0], COLORS[0])
    _line(fig, b.steps, names[1], COLORS[1], "dash")
    if al.fork_step:
        fig.add_vline(x=al.fork_step, line_width=2, line_dash="dot", line_color="#555",
                      annotation_text=f"fork after step {al.fork_step}", annotation_position="top left")
    if al.first_divergence and al.first_divergence != (al.fork_step or 0) + 1:
        fig.add_vline(x=al.first_divergence, line_width=1, line_color="#d62728",
                      annotation_text=f"first difference: step {al.first_divergence}",
                      annotation_position="bottom right")
    low = min([0.0] + [r.score for r in a.steps + b.steps])
    n = max(len(a.steps), len(b.steps), 10)
    fig.update_layout(height=300, margin={"l": 10, "r": 10, "t": 30, "b": 30}, legend={"orientation": "h", "y": 1.15},
                      yaxis={"title": "score", "range": [low - 5, 108]}, xaxis={"title": "step", "range": [0, n + 0.5]})
    return fig


def mechanism_table(a: Episode, b: Episode) -> list[dict[str, Any]]:
    """One row per mechanism count (the evaluation's columns), A next to B, plus the outcome."""
    ma, mb = episode_metrics(a), episode_metrics(b)
    rows = [{"": "final score", "A": ma["raw_final"], "B": mb["raw_final"]},
            {"": "steps", "A": ma["steps"], "B": mb["steps"]},
            {"": "ended by", "A": ma["reason"], "B": mb["reason"]}]
    for key, label in MECHANISM_COLUMNS:
        va, vb = ma["activity"].get(key, 0), mb["activity"].get(key, 0)
        if key.startswith("share"):
            va, vb = f"{100 * va:.0f}%", f"{100 * vb:.0f}%"
        rows.append({"": label, "A": va, "B": vb})
    for name, label in (("gate1_drops", "Gate-1 drop"), ("stagnation_modes", "stagnation"), ("critic", "Critic"),
                        ("decisions", "decision")):
        for k in sorted(set(ma.get(name, {})) | set(mb.get(name, {}))):
            rows.append({"": f"{label}: {k}", "A": ma[name].get(k, 0), "B": mb[name].get(k, 0)})
    return [{k: "–" if v is None else str(v) for k, v in r.items()} for r in rows]


def provenance_warning(a: Episode, b: Episode) -> str | None:
    """Two episodes compared as presets must differ in their preset only: say when the code that recorded them
    differs, or when their settings differ in more than the preset's own fields. Markdown: the recorded commits,
    machines and setting names are escaped (views.common.md_text)."""
    from agent_core.provenance import describe_code, describe_machine, same_machine_kind, shipped_labels

    out = []
    ca, cb = a.header.code or {}, b.header.code or {}
    labels = shipped_labels()

    def identity(ep: Episode, code: dict) -> tuple:
        if code:
            return code.get("commit"), code.get("diff", "")
        label = labels.get(ep.header.run_id)
        return ("shipped", label["committed_in"]) if label else None

    ia, ib = identity(a, ca), identity(b, cb)
    if ia is None or ib is None:
        out.append("the code revision is not recorded for " + " and ".join(x for x, i in (("A", ia), ("B", ib))
                                                                         if i is None) + " (an older trace)")
    elif ia != ib:
        out.append(f"they were recorded by different code (A {md_text(describe_code(ca, a.header.run_id))}, "
                   f"B {md_text(describe_code(cb, b.header.run_id))})")
    ma, mb = a.header.machine or {}, b.header.machine or {}
    if ma and mb and not same_machine_kind(ma, mb):  # the same code may round differently on another CPU
        out.append(f"they were played on different machines (A {md_text(describe_machine(ma))}, "
                   f"B {md_text(describe_machine(mb))})")
    extra = settings_differences(a.header.config, b.header.config)
    if extra:
        out.append("their settings differ beyond the preset: " + md_text(", ".join(extra[:6])) +
                   (f" and {len(extra) - 6} more" if len(extra) > 6 else ""))
    return ("A difference between A and B may come from more than the mechanisms: " + "; ".join(out) + ".") \
        if out else None


def settings_differences(a: dict, b: dict) -> list[str]:
    """Dotted config fields that differ, leaving out what the presets set (their mechanisms' switches) and
    where the store lives."""
    from agent_core.config import PRESETS

    preset_keys = {k for _d, ov in PRESETS.values() for k in ov} | {"preset", "amm.store_dir", "memory.persist_dir"}

    def flat(d: dict, pre: str = "") -> dict:
        out: dict = {}
        for k, v in (d or {}).items():
            if isinstance(v, dict):
                out.update(flat(v, f"{pre}{k}."))
            else:
                out[f"{pre}{k}"] = v
        return out
    fa, fb = flat(a), flat(b)
    return sorted(k for k in set(fa) | set(fb) if k not in preset_keys and fa.get(k) != fb.get(k))



def step_story(rec: StepRecord) -> list[str]:
    """One step's decisions in a few lines of markdown, from its record only: who acted, the trigger, Gate-1's
    drops, the Critic, memory injections and the typed decisions (the Compare page's "At step k"); the recorded
    words are escaped (views.common.md_text, md_code)."""
    from agent_core.evaluate.paired import attribute

    out = [f"**{md_text(actor_label(rec.system))}** played {md_code(rec.action)} (reward {rec.reward:+g}, "
           f"score {rec.score:g})"]
    if rec.trigger is not None:
        out.append(f"trigger: {md_text(rec.trigger.name)} ({md_text(rec.trigger.rule)})")
    out += [f"Gate-1 dropped {md_code(g.proposed)} ({md_text(g.reason)})" for g in rec.gate1 if g.decision == "DROP"]
    if rec.critic is not None:
        out.append(f"Critic: {md_text(rec.critic.status)}" + (f", admitted {md_text(', '.join(rec.critic.admitted))}"
                                                              if rec.critic.admitted else ""))
    out += [f"memory {md_text(x.trigger)} injected into {md_text(x.injected_into)} ({len(x.injected_ids)} records)"
            for x in rec.retrievals if x.injected_into]
    out += [md_text(d.describe()) for d in rec.decisions if d.kind not in ("focus_margin",)]
    why = attribute(rec, None)
    out.append(f"decided by: {md_text(why.mechanism)} ({md_text(why.kind)})")
    return out
