"""The Run page's charts, built from step records only: the mode timeline and the score trajectory.

Colours come from agent_core.palette so an actor looks the same on every chart and page.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Iterable, Sequence

# pandas before plotly, at import time: plotly looks pandas up in sys.modules when it builds a figure, and a
# second browser session doing so while the first is still importing pandas got a half-initialised module
# ("partially initialized module 'pandas' has no attribute 'Series'")
import pandas  # noqa: F401
import plotly.graph_objects as go

from agent_core.palette import ACTOR_COLORS, MEMORY_COLOR, SCORE_LINE, STAGNATION_COLOR
from agent_core.trace import StepRecord
from memory_store import TAG_COLORS
from views.common import actor_color, actor_label, clip

BACK_TO_SWIFT = ("buffer_empty", "buffer_failed", "swift_forced")  # switch names that hand control back to Swift
LANE_GAP = 0.45  # vertical distance between two marker lanes (the step bars are 1 high)


@dataclass
class Marks:
    """One set of markers in one lane of the timeline."""

    name: str  # legend entry
    symbol: str
    color: str
    steps: list[int] = field(default_factory=list)
    hover: list[str] = field(default_factory=list)
    size: int = 11

    def add(self, step: int, hover: str) -> None:
        self.steps.append(step)
        self.hover.append(hover)


def _h(text: str, n: int = 80) -> str:
    """Clip and escape text for a Plotly hover label (which reads a little HTML)."""
    return html.escape(clip(text, n), quote=False)


def _switch_marks(records: list[StepRecord]) -> list[Marks]:
    to_sage = Marks("⚡ switch to Sage", "triangle-up", actor_color("sage"))
    to_swift = Marks("⚡ back to Swift", "triangle-down", actor_color("swift"))
    for r in records:
        if r.trigger:
            lane = to_swift if r.trigger.name in BACK_TO_SWIFT else to_sage
            lane.add(r.step, f"step {r.step}: ⚡ <b>{_h(r.trigger.name)}</b><br>{_h(r.trigger.rule, 120)}")
    return [to_sage, to_swift]


def _drop_marks(records: list[StepRecord]) -> list[Marks]:
    marks = Marks("Gate-1 drop", "x", actor_color("gate1_drop"))
    for r in records:
        drops = [g for g in r.gate1 if g.decision == "DROP"]
        if drops:
            lines = [f"• {_h(g.proposed, 50)} ({_h(actor_label(g.source))}): {_h(g.detail or g.reason, 90)}"
                     for g in drops]
            marks.add(r.step, f"step {r.step}: Gate-1 dropped<br>" + "<br>".join(lines))
    return [marks]


def _stagnation_marks(records: list[StepRecord]) -> list[Marks]:
    marks = Marks("stagnation report", "diamond", STAGNATION_COLOR)
    for r in records:
        if r.stagnation:
            words = r.stagnation.explanation or r.stagnation.modes
            marks.add(r.step, f"step {r.step}: stagnation<br>" + "<br>".join(f"• {_h(w, 90)}" for w in words))
    return [marks]


def _critic_marks(records: list[StepRecord]) -> list[Marks]:
    called = Marks("Critic called", "circle", actor_color("critic"))
    other = Marks("Critic not called (skipped / failed)", "circle-open", actor_color("critic"))
    for r in records:
        c = r.critic
        if c:
            text = f"step {r.step}: Critic <b>{_h(c.status)}</b>"
            if c.diagnosis:
                text += f"<br>diagnosis: {_h(c.diagnosis, 120)}"
            elif c.reason or c.error:
                text += f"<br>{_h(c.error or c.reason, 120)}"
            (called if c.status == "called" else other).add(r.step, text)
    return [called, other]


def _memory_read_marks(records: list[StepRecord]) -> list[Marks]:
    """T1 and T4, side by side in one lane (both can happen in one step: a failed T1 retry calls Sage)."""
    t1 = Marks("memory T1 (Swift retry)", "star", MEMORY_COLOR)
    t4 = Marks("memory T4 (Sage hints)", "square", MEMORY_COLOR)
    for r in records:
        for x in r.retrievals:
            mark = {"T1": t1, "T4": t4}.get(x.trigger)
            if mark is None:
                continue
            n = len(x.injected_ids)
            text = f"step {r.step}: <b>{x.trigger}</b> {_h(x.why, 90)}<br>"
            text += _h(x.error, 120) if x.error else f"{n} record(s) injected" + (f"<br>{_h(x.outcome, 120)}"
                                                                                   if x.outcome else "")
            mark.add(r.step - 0.18 if x.trigger == "T1" else r.step + 0.18, text)
    return [t1, t4]


def _memory_write_marks(records: list[StepRecord]) -> list[Marks]:
    by_tag: dict[str, Marks] = {}
    for r in records:
        for w in r.memories_written:
            m = by_tag.setdefault(w.tag, Marks(f"memory written: {_h(w.tag, 40)}", "circle",
                                               TAG_COLORS.get(w.tag, "#777"), size=8))  # a legend entry is HTML too
            m.add(r.step, f"step {r.step}: wrote <b>{_h(w.tag)}</b><br>{_h(w.error or w.why, 120)}")
    return list(by_tag.values())


# lane name (y-axis label) -> mechanism that must have run (None: always) and the marks it holds
LANES = (("switch", None, _switch_marks), ("Gate-1", "gate1", _drop_marks),
         ("stagnation", "stagnation", _stagnation_marks), ("Critic", "critic", _critic_marks),
         ("memory read", "amm", _memory_read_marks), ("memory write", "amm", _memory_write_marks))


def _lanes(records: list[StepRecord], mechanisms: Iterable[str]) -> list[tuple[str, list[Marks]]]:
    """The lanes to draw: always switches; an SRM lane when it ran or its marks exist (an honest record)."""
    on = set(mechanisms)
    out = []
    for label, needs, build in LANES:
        marks = build(records)
        if needs is None or needs in on or any(m.steps for m in marks):
            out.append((label, marks))
    return out


def _add_bars(fig: go.Figure, records: list[StepRecord]) -> None:
    """One bar per step in the colour of the system that acted; hover: the action and the switch rule."""
    systems = [s for s in ACTOR_COLORS if any(r.system == s for r in records)]
    systems += sorted({r.system for r in records} - set(systems))
    for system in systems:
        rows = [r for r in records if r.system == system]
        hover = []
        for r in rows:
            why = f"switch: <b>{_h(r.trigger.name)}</b> ({_h(r.trigger.rule, 120)})" if r.trigger else "no switch"
            hover.append(f"step {r.step}: {_h(actor_label(r.system))}<br>action: {_h(r.action, 60)}<br>{why}")
        fig.add_bar(x=[r.step for r in rows], y=[1] * len(rows), name=_h(actor_label(system), 40), width=0.92,
                    marker_color=actor_color(system), hovertext=hover, hoverinfo="text")


def timeline_figure(records: list[StepRecord], cursor: int | None = None,
                    mechanisms: Iterable[str] = ("swift", "sage"), hits: tuple[int, ...] = ()) -> go.Figure:
    """Who acted at each step (coloured bars), with one lane of symbols per kind of event above them, so
    marks of the same step never overlap: switches, Gate-1 drops, stagnation reports, Critic calls."""
    fig = go.Figure()
    _add_bars(fig, records)
    lanes = _lanes(records, mechanisms)
    if hits:  # the steps a search found (views/episode_search.py), in a lane of their own
        found = Marks("search hit", "star", "#e377c2", size=13)
        by_step = {r.step: r for r in records}
        for h in hits:
            if h in by_step:
                found.add(h, f"step {h}: search hit<br>{_h(by_step[h].action, 60)}")
        lanes.append(("search", [found]))
    ticks, labels = [0.5], ["acted"]
    for i, (label, marks) in enumerate(lanes):
        y = 1 + LANE_GAP * (i + 1)
        ticks.append(y)
        labels.append(label)
        for m in marks:
            if m.steps:
                fig.add_scatter(x=m.steps, y=[y] * len(m.steps), mode="markers", name=m.name,
                                marker={"symbol": m.symbol, "size": m.size, "color": m.color,
                                        "line": {"width": 1.5, "color": m.color}},
                                hovertext=m.hover, hoverinfo="text")
    if cursor:
        fig.add_vline(x=cursor, line_width=2, line_dash="dot", line_color=SCORE_LINE)
    n = max((r.step for r in records), default=1)
    fig.update_layout(height=150 + 32 * len(lanes), margin={"l": 10, "r": 10, "t": 45, "b": 30},
                      barmode="overlay", bargap=0.05,
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
                      yaxis={"range": [0, ticks[-1] + LANE_GAP * 0.8], "fixedrange": True, "tickvals": ticks,
                             "ticktext": labels, "showgrid": False, "zeroline": False},
                      xaxis={"title": "step", "range": [0.4, max(n, 10) + 0.6], "dtick": 1 if n <= 30 else None})
    return fig


BRANCH_COLORS = ("#a0527a", "#2a7f62", "#b8860b", "#4b6cb7", "#8c564b", "#6b6b6b")


def score_figure(records: list[StepRecord], cursor: int | None = None,
                 branches: Sequence[dict] = ()) -> go.Figure:
    """Score per step, reward markers, background shaded by the acting system; `branches` (views.roads): roads
    not taken, dashed from the step they leave the episode (the action played under the same continuation
    solid-dotted)."""
    fig = go.Figure()
    seg_start = 0
    for i in range(1, len(records) + 1):
        if i == len(records) or records[i].system != records[seg_start].system:
            fig.add_vrect(x0=records[seg_start].step - 0.5, x1=records[i - 1].step + 0.5, line_width=0,
                          fillcolor=actor_color(records[seg_start].system), opacity=0.13, layer="below")
            seg_start = i
    for system in [s for s in ACTOR_COLORS if any(r.system == s for r in records)]:
        fig.add_scatter(x=[None], y=[None], mode="markers", name=f"{actor_label(system)} acting",
                        marker={"symbol": "square", "size": 12, "color": actor_color(system), "opacity": 0.35})
    fig.add_scatter(x=[r.step for r in records], y=[r.score for r in records], mode="lines+markers", name="score",
                    line={"color": SCORE_LINE, "width": 2.5}, marker={"size": 5},
                    hovertext=[f"step {r.step}: score {r.score:g}<br>{_h(r.action, 60)}" for r in records],
                    hoverinfo="text")
    rew = [r for r in records if r.reward != 0]
    if rew:
        fig.add_scatter(x=[r.step for r in rew], y=[r.score for r in rew], mode="markers+text", name="reward",
                        text=[f"{r.reward:+g}" for r in rew], textposition="top center", cliponaxis=False,
                        marker={"size": 12, "color": ["#2ca02c" if r.reward > 0 else "#d62728" for r in rew],
                                "line": {"width": 1, "color": "white"}},
                        hovertext=[f"step {r.step}: reward {r.reward:+g}<br>{_h(r.action, 60)}" for r in rew],
                        hoverinfo="text")
    for i, b in enumerate(branches):
        xs = list(range(b["step"], b["step"] + len(b["scores"]) + 1))
        ys = [b["start"]] + list(b["scores"])
        fig.add_scatter(x=xs, y=ys, mode="lines+markers", name=_h(b["label"], 50),
                        line={"color": SCORE_LINE if b.get("played") else BRANCH_COLORS[i % len(BRANCH_COLORS)],
                              "width": 2, "dash": "dot" if b.get("played") else "dash"}, marker={"size": 4},
                        hovertext=[f"{_h(b['label'], 60)}<br>step {x}: score {y:g}" for x, y in zip(xs, ys)],
                        hoverinfo="text")
    if cursor:
        fig.add_vline(x=cursor, line_width=2, line_dash="dot", line_color=SCORE_LINE)
    low = min([0.0] + [r.score for r in records] + [y for b in branches for y in b["scores"]])
    n = max([r.step for r in records] + [b["step"] + len(b["scores"]) for b in branches] or [1])
    fig.update_layout(height=280, margin={"l": 10, "r": 10, "t": 30, "b": 30},
                      legend={"orientation": "h", "y": 1.15, "x": 0},
                      # room above 100 for a reward's label (+85 at the top was cut off)
                      yaxis={"title": "score", "range": [low - 5, 116]},
                      xaxis={"title": "step", "range": [0.4, max(n, 10) + 0.6]})
    return fig
