"""Run: watch the SwiftSage agent play ScienceWorld one step at a time, live or from a recorded trace.

Both views render from step records only (agent_core.trace): a live run shows the records its agent
has written so far, a recorded episode shows the records read back from its JSONL file. The render
functions below take (header, records, step) and never touch the agent, so replay is instant.

Tests drive the live view without slow models by putting a callable `cfg -> Agent` into
`st.session_state["agent_factory"]` before the first run; without it the page builds the real agent
(the trained Swift model and the chosen LLM backend).

Environment variables: SWIFTSAGE_RUNS_DIR (where live runs are recorded and looked up, default
runs/), SWIFTSAGE_DEFAULT_EMBEDDED_MODEL (the embedded LLM preselected in the sidebar, e.g.
smollm2-135m for a fast demo).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # AppTest.from_file("pages/0_Run.py") runs this file on its own
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import plotly.graph_objects as go  # noqa: E402
import streamlit as st  # noqa: E402

from agent_core.config import PRESETS, Config, LLMConfig, SwiftConfig, apply_overrides, preset  # noqa: E402
from agent_core.env import SPLITS, catalog  # noqa: E402
from agent_core.llm.embedded import MODELS as EMBEDDED_MODELS  # noqa: E402
from agent_core.palette import ACTOR_COLORS, ACTOR_LABELS  # noqa: E402
from agent_core.trace import (EpisodeHeader, EpisodeSummary, StepRecord, TraceError, list_traces,  # noqa: E402
                              read_episode)

log = logging.getLogger("swiftsage.run_page")

RUNS_DIR = Path(os.environ.get("SWIFTSAGE_RUNS_DIR") or ROOT / "runs")
EPISODES_DIR = Path(os.environ.get("SWIFTSAGE_EXAMPLES_DIR") or ROOT / "assets" / "episodes")
_default_emb = os.environ.get("SWIFTSAGE_DEFAULT_EMBEDDED_MODEL") or LLMConfig().embedded_model
DEFAULT_EMBEDDED = _default_emb if _default_emb in EMBEDDED_MODELS else LLMConfig().embedded_model
LIST_PAGE = 20  # steps shown in the step list before "show all"

QUESTIONS = {
    "Q1": "Which objects are needed, and where are they likely to be?",
    "Q2": "Which of them are not collected yet?",
    "Q3": "Which subgoals complete the task efficiently?",
    "Q4": "Which subgoals are done, and which one to focus on now?",
    "Q5": "Is a mistake blocking progress, and how to fix it?",
}
MAPPING_WORDS = {"exact": "exactly a valid action", "normalized": "valid after rewording (articles, synonyms)",
                 "similarity": "the most similar valid action (sentence embeddings)",
                 "unmapped": "no valid action close enough: skipped"}
WHAT = {
    "page": "What is this? A *dual-process* agent plays a ScienceWorld science task. **Swift** (fast, 'System 1') "
            "is a small model that imitates expert play and proposes each action in a blink. **Sage** (slow, "
            "'System 2') is a large language model that writes a plan and a short list of actions when Swift "
            "looks stuck or is about to make a risky move.",
    "obs": "What is this? The action taken at this step and what the game answered.",
    "look": "What is this? What the agent sees around it after the step ('look around'): the room and its objects.",
    "inv": "What is this? What the agent is carrying after the step.",
    "timeline": "What is this? Who chose each action: one cell per step, coloured by the system that acted. A ⚡ "
                "marks a switch and its reason (hover a cell for the rule that fired).",
    "plan": "What is this? Sage's plan: its answers to five questions about the task, written the last time Sage "
            "was called. Swift ignores it; Sage turns it into actions.",
    "buffer": "What is this? The action buffer is Sage's to-do list: the actions it planned, taken one per step in "
              "order (first in, first out). Each one is first matched to an action the game accepts.",
    "score": "What is this? The game's score (0-100) after each step. Dots with a number mark steps that earned "
             "(or lost) points; the background shows which system was acting.",
    "steps": "What is this? Every step so far, newest first. Open one to see why it happened, Swift's ranked "
             "candidates, the exact prompts Sage was given and its raw answers, and the full step record.",
    "recorded": "Every live run is recorded as it happens (one JSON line per step). A recorded episode replays "
                "from that file alone: no model is called, so scrubbing is instant.",
}


# ----------------------------------------------------------------------------- the real agent

@st.cache_resource(show_spinner="Loading the Swift model (once per server)...")
def _swift_policy(swift_cfg_json: str):
    """The trained Swift model: read-only, shared by every browser session."""
    from agent_core.controller import load_swift

    cfg = Config(swift=SwiftConfig(**json.loads(swift_cfg_json)))
    return load_swift(cfg)


@st.cache_resource(show_spinner="Preparing the LLM backend...")
def _llm_backend(llm_cfg_json: str):
    """One backend per backend settings, shared by every session (the embedded one serializes its calls)."""
    from agent_core.llm import make_backend

    return make_backend(LLMConfig(**json.loads(llm_cfg_json)))


class _AnnouncingLLM:
    """Forwards every call to a shared backend and tells the page first, so a slow call says what it is."""

    def __init__(self, inner):
        self._inner = inner
        self.on_call = None  # set by the page around one step

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def chat(self, messages, **kwargs):
        if self.on_call is not None:
            self.on_call()
        return self._inner.chat(messages, **kwargs)


def _close_env(env) -> None:
    try:
        env.close()
    except Exception:  # noqa: BLE001 - best effort when a session goes away
        pass


def _product_agent(cfg: Config):
    """The real agent: trained Swift + the chosen LLM backend + its own ScienceWorld JVM."""
    from agent_core.controller import Agent

    swift = _swift_policy(json.dumps(dataclasses.asdict(cfg.swift)))
    llm = _AnnouncingLLM(_llm_backend(json.dumps(dataclasses.asdict(cfg.llm))))
    agent = Agent(cfg, swift, llm, runs_dir=RUNS_DIR)
    weakref.finalize(agent, _close_env, agent.env)  # a session that goes away frees its JVM
    return agent


# ----------------------------------------------------------------------------- small helpers

def actor_label(system: str) -> str:
    return ACTOR_LABELS.get(system, system)


def actor_color(system: str) -> str:
    return ACTOR_COLORS.get(system, "#7f7f7f")


def badge(system: str) -> str:
    return (f"<span style='background:{actor_color(system)};color:white;padding:2px 10px;border-radius:10px;"
            f"font-weight:600;white-space:nowrap'>{actor_label(system)}</span>")


def clip(text: str, n: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def rules(config: dict[str, Any]) -> list[str]:
    """The switching rules in words with their numbers, from the run's own configuration."""
    c = config.get("controller", {}) if isinstance(config, dict) else {}
    w = c.get("stuck_window", 5)
    limit = c.get("buffer_fail_limit", 3)
    prefixes = ", ".join(f"'{p} ...'" for p in c.get("critical_prefixes", ["focus on"]))
    markers = c.get("unexpected_markers", [])
    return [
        f"**stuck**: the rewards of the last {w} steps sum to 0 (`controller.stuck_window = {w}`)",
        "**invalid**: Swift's top action is not valid in the current state",
        f"**critical**: Swift proposes a key decision ({prefixes}) that can end the task",
        f"**unexpected**: the last observation reports a failure or anomaly ({len(markers)} phrases such as "
        f"{', '.join(repr(m) for m in markers[:3])})",
        "**buffer_empty**: back to Swift when Sage's action buffer is empty",
        f"**buffer_failed**: back to Swift when {limit} buffered actions fail in a row "
        f"(`controller.buffer_fail_limit = {limit}`)",
    ]


def consequence(rec: StepRecord) -> str:
    """What the switch led to at this step, in words."""
    if rec.trigger is None:
        return ""
    if rec.trigger.name in ("buffer_empty", "buffer_failed"):
        return "Control went back to Swift."
    if rec.system == "sage":
        return "Sage was called: it planned, filled the action buffer, and this step's action is the first one."
    if any(c.error for c in rec.llm_calls):
        return "Sage was called but its model call failed, so Swift's action was taken."
    return "Sage was called but none of its actions fitted the game, so Swift's action was taken."


def plan_step(records: list[StepRecord], t: int) -> int | None:
    """The step at which the plan shown at step t was written (its last successful planning call)."""
    for r in reversed(records[:t]):
        if any(c.purpose == "plan" and not c.error for c in r.llm_calls):
            return r.step
    return None


# ----------------------------------------------------------------------------- charts

def timeline_figure(records: list[StepRecord], cursor: int | None = None) -> go.Figure:
    """One coloured cell per step (who acted), ⚡ where control switched, the rule on hover."""
    fig = go.Figure()
    systems = [s for s in ACTOR_COLORS if any(r.system == s for r in records)]
    systems += sorted({r.system for r in records} - set(systems))
    for system in systems:
        rows = [r for r in records if r.system == system]
        hover = []
        for r in rows:
            why = (f"switch: <b>{r.trigger.name}</b> ({r.trigger.rule})" if r.trigger else "no switch")
            hover.append(f"step {r.step}: {actor_label(r.system)}<br>action: {clip(r.action, 60)}<br>{why}")
        fig.add_bar(x=[r.step for r in rows], y=[1] * len(rows), name=actor_label(system), width=0.92,
                    marker_color=actor_color(system), hovertext=hover, hoverinfo="text")
    trig = [r for r in records if r.trigger]
    if trig:
        fig.add_scatter(x=[r.step for r in trig], y=[1.25] * len(trig), mode="text", name="switch",
                        text=["⚡" + r.trigger.name for r in trig], textposition="middle center",
                        hovertext=[f"step {r.step}: <b>{r.trigger.name}</b><br>{r.trigger.rule}" for r in trig],
                        hoverinfo="text", showlegend=False, textfont={"size": 11})
    drops = [r for r in records if any(getattr(g, "decision", "") == "dropped" for g in r.gate1)]
    if drops:
        fig.add_scatter(x=[r.step for r in drops], y=[0.5] * len(drops), mode="markers", name="Gate-1 drop",
                        marker={"symbol": "x", "size": 10, "color": actor_color("gate1_drop")},
                        hovertext=[f"step {r.step}: Gate-1 dropped an action" for r in drops], hoverinfo="text")
    if cursor:
        fig.add_vline(x=cursor, line_width=2, line_dash="dot", line_color="#333")
    n = max((r.step for r in records), default=1)
    fig.update_layout(height=190, margin={"l": 10, "r": 10, "t": 45, "b": 30}, barmode="overlay",
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
                      bargap=0.05,
                      yaxis={"visible": False, "range": [0, 1.45], "fixedrange": True},
                      xaxis={"title": "step", "range": [0.4, max(n, 10) + 0.6], "dtick": 1 if n <= 30 else None})
    return fig


def score_figure(records: list[StepRecord], cursor: int | None = None) -> go.Figure:
    """Score per step, reward markers, background shaded by the acting system."""
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
                    line={"color": "#222", "width": 2}, marker={"size": 5},
                    hovertext=[f"step {r.step}: score {r.score:g}<br>{clip(r.action, 60)}" for r in records],
                    hoverinfo="text")
    rew = [r for r in records if r.reward != 0]
    if rew:
        fig.add_scatter(x=[r.step for r in rew], y=[r.score for r in rew], mode="markers+text", name="reward",
                        text=[f"{r.reward:+g}" for r in rew], textposition="top center",
                        marker={"size": 12, "color": ["#2ca02c" if r.reward > 0 else "#d62728" for r in rew],
                                "line": {"width": 1, "color": "white"}},
                        hovertext=[f"step {r.step}: reward {r.reward:+g}<br>{clip(r.action, 60)}" for r in rew],
                        hoverinfo="text")
    if cursor:
        fig.add_vline(x=cursor, line_width=2, line_dash="dot", line_color="#333")
    low = min([0.0] + [r.score for r in records])
    n = max((r.step for r in records), default=1)
    fig.update_layout(height=280, margin={"l": 10, "r": 10, "t": 30, "b": 30},
                      legend={"orientation": "h", "y": 1.15, "x": 0},
                      yaxis={"title": "score", "range": [low - 5, 108]},
                      xaxis={"title": "step", "range": [0.4, max(n, 10) + 0.6]})
    return fig


# ----------------------------------------------------------------------------- panels of one step

def render_header(header: EpisodeHeader, records: list[StepRecord], t: int, *, total: int | None = None,
                  next_hint: str | None = None) -> None:
    rec = records[t - 1] if t > 0 else None
    system = rec.system if rec else "swift"
    models = header.models or {}
    st.markdown(f"### Step {t} · {header.task} (variation {header.variation}, {header.split})")
    st.caption(f"**Task:** {header.task_description}")
    c1, c2, c3, c4 = st.columns([1, 1, 1, 2])
    c1.metric("Step" if total is None else f"Step (of {total})", str(t),
              help="Environment steps taken so far (0 = the start state).")
    c2.metric("Score", f"{rec.score:g}" if rec else "0", delta=f"{rec.reward:+g}" if rec and rec.reward else None,
              help="The game's score, 0-100 (cumulative); below 0 means the task failed.")
    c3.markdown("**Mode**<br>" + badge(system), unsafe_allow_html=True,
                help="Which system chose this step's action: Swift (fast model) or Sage (slow LLM planner).")
    c4.caption(f"preset **{header.config.get('preset', '?')}** · Swift: `{models.get('swift', '?')}` · "
               f"Sage: `{models.get('sage', '?')}` · run `{header.run_id}`")
    if next_hint:
        c4.caption(next_hint)


def render_alerts(rec: StepRecord | None, summary: EpisodeSummary | None, at_end: bool) -> None:
    """What the user must not miss at this step: why control switched, model failures, JVM events."""
    if rec is None:
        return
    if rec.trigger:
        st.info(f"**Why did control switch?** Rule **{rec.trigger.name}** fired: {rec.trigger.rule}. "
                f"{consequence(rec)}", icon="⚡")
    for c in rec.llm_calls:
        if c.error:
            who = f"{c.backend} {c.model}".strip()
            st.error(f"Sage's LLM call ({c.purpose}, {who}) failed at this step, so the agent fell back to Swift's "
                     f"action. The error: {c.error}")
    for ev in rec.env_events:
        st.warning(f"ScienceWorld: {ev.kind}: {ev.detail}")
    if rec.failed:
        st.error(f"The task failed at this step (score {rec.score:g}).")
    if at_end and summary is not None:
        text = (f"Episode over: **{summary.reason}** after {summary.steps} steps, final score "
                f"{summary.final_score:g}." + (f" Error: {summary.error}" if summary.error else ""))
        (st.success if summary.success else st.warning)(text)


def render_observation(header: EpisodeHeader, rec: StepRecord | None) -> None:
    c1, c2, c3 = st.columns(3)
    with c1:
        st.markdown("**Observation**")
        st.caption(WHAT["obs"])
        with st.container(border=True, height=230):
            if rec is None:
                st.markdown("*Start of the episode*")
                st.text(header.initial_observation)
            else:
                mark = "" if rec.action_valid in (None, True) else " ✗ not a valid action"
                st.markdown(f"**>** `{rec.action}` ({actor_label(rec.system)}){mark}")
                st.text(rec.observation)
    with c2:
        st.markdown(f"**Look around**{' · ' + rec.room if rec and rec.room else ''}")
        st.caption(WHAT["look"])
        with st.container(border=True, height=230):
            st.text(rec.look if rec else header.initial_look)
    with c3:
        st.markdown("**Inventory**")
        st.caption(WHAT["inv"])
        with st.container(border=True, height=230):
            st.text(rec.inventory if rec else header.initial_inventory)


def render_timeline(header: EpisodeHeader, records: list[StepRecord], cursor: int | None) -> None:
    st.markdown("**Mode timeline: who acted at each step**")
    st.caption(WHAT["timeline"])
    if not records:
        st.caption("No steps yet: the agent starts with Swift.")
    else:
        st.plotly_chart(timeline_figure(records, cursor), key="run_timeline_chart", width="stretch",
                        config={"displayModeBar": False})
        switches = [r for r in records[: cursor or len(records)] if r.trigger][-3:]
        if switches:
            st.caption("Latest switches: " + "; ".join(f"step {r.step}: **{r.trigger.name}** ({r.trigger.rule})"
                                                       for r in reversed(switches)))
    with st.expander("The switching rules (when Swift hands control to Sage, and back)"):
        st.caption("The agent starts with Swift. Before each Swift action it checks these rules; the first that "
                   "holds calls Sage, whose buffered actions then run until the buffer is empty or fails.")
        st.markdown("\n".join(f"- {r}" for r in rules(header.config)))


def render_plan(records: list[StepRecord], t: int) -> None:
    st.markdown("**Sage's current plan (Q1-Q5)**")
    st.caption(WHAT["plan"])
    rec = records[t - 1] if t > 0 else None
    plan = rec.plan if rec else {}
    if not plan:
        st.info("Sage has not planned yet in this episode: Swift has been acting alone.")
        return
    made = plan_step(records, t)
    if made is not None:
        ago = t - made
        st.caption(f"Written at step {made}" + (" (this step)" if ago == 0 else f", {ago} step{'s' if ago > 1 else ''} "
                                                                               f"ago"))
    for q, question in QUESTIONS.items():
        answer = plan.get(q)
        st.markdown(f"**{q}. {question}**  \n{answer if answer else '*(no answer)*'}")


def render_buffer(rec: StepRecord | None) -> None:
    st.markdown("**Action buffer**")
    st.caption(WHAT["buffer"])
    if rec is None:
        st.caption("Empty: nothing planned yet.")
        return
    src = "taken from Sage's buffer" if rec.system == "sage" else f"chosen by {actor_label(rec.system)}"
    st.markdown(f"**Consumed this step:** `{rec.action}` ({src})")
    if rec.buffer_after:
        st.markdown("**Pending** (next first):\n" + "\n".join(f"{i}. `{a}`" for i, a in
                                                              enumerate(rec.buffer_after, 1)))
    else:
        st.markdown("**Pending:** *(empty: Swift proposes the next action)*")
    if rec.buffer_before and rec.buffer_before != rec.buffer_after:
        st.caption("Buffer when this step began: " + " → ".join(f"`{a}`" for a in rec.buffer_before))
    if rec.mappings:
        st.markdown("**Mapped onto valid actions:**")
        st.dataframe([{"planned": m.raw, "mapped to": m.mapped or "—", "how": m.method,
                       "similarity": m.similarity} for m in rec.mappings], hide_index=True, width="stretch")
        st.caption(" · ".join(f"**{k}**: {v}" for k, v in MAPPING_WORDS.items()))


def render_score(records: list[StepRecord], cursor: int | None) -> None:
    st.markdown("**Score trajectory**")
    st.caption(WHAT["score"])
    if not records:
        st.caption("No steps yet.")
        return
    st.plotly_chart(score_figure(records, cursor), key="run_score_chart", width="stretch",
                    config={"displayModeBar": False})


def step_summary(r: StepRecord) -> str:
    parts = [f"Step {r.step}", actor_label(r.system), r.action, f"score {r.score:g} ({r.reward:+g})"]
    if r.trigger:
        parts.append(f"⚡ {r.trigger.name}")
    if any(c.error for c in r.llm_calls):
        parts.append("⚠ LLM error")
    if r.action_valid is False:
        parts.append("✗ not valid")
    return " · ".join(parts)


def render_step_detail(r: StepRecord) -> None:
    st.markdown(f"**Action** `{r.action}` by {actor_label(r.system)} → room *{r.room or '?'}*, score "
                f"{r.score:g} ({r.reward:+g}){' · done' if r.done else ''}")
    st.text(clip(r.observation, 600))
    if r.trigger:
        st.markdown(f"⚡ **Switch: {r.trigger.name}** ({r.trigger.rule})")
        if r.trigger.evidence:
            st.caption("Evidence: " + clip(json.dumps(r.trigger.evidence, default=str), 300))
    for c in r.llm_calls:
        if c.error:
            st.error(f"LLM call {c.purpose} failed: {c.error}")
    if r.notes:
        st.markdown("**Notes from the agent:**\n" + "\n".join(f"- {n}" for n in r.notes))
    if r.gate1:
        st.markdown("**Gate-1** (checks every proposed action against the valid actions before it runs):")
        st.dataframe([{"from": g.source, "proposed": g.proposed, "decision": g.decision, "result": g.result,
                       "reason": g.reason} for g in r.gate1], hide_index=True, width="stretch")
    if r.stagnation:
        st.warning("Stagnation report: " + clip(json.dumps(r.stagnation, default=str), 400))
    if r.critic:
        st.info("Critic: " + clip(json.dumps(r.critic, default=str), 400))
    if r.memories_written or r.retrievals:
        st.caption(f"Memory: {len(r.memories_written)} written, {len(r.retrievals)} retrieval(s) at this step "
                   f"(details on the Memory explorer page).")
    if r.timings:
        st.caption("Time: " + ", ".join(f"{k} {v:.2f} s" for k, v in r.timings.items()))
    tabs = st.tabs(["Swift candidates", "Prompts & raw outputs", "Full record (JSON)"])
    with tabs[0]:
        if r.swift_candidates:
            st.caption(f"Swift's ranked guesses (log-probability; higher is surer). Unconstrained top-1: "
                       f"`{r.swift_top1}`.")
            st.dataframe([{"action": c.action, "log-prob": c.score, "valid": c.valid} for c in r.swift_candidates],
                         hide_index=True, width="stretch")
            if r.swift_valid_ranked:
                st.caption("Best valid actions: " + ", ".join(f"`{c.action}`" for c in r.swift_valid_ranked[:5]))
        else:
            st.caption("Swift was not asked at this step (the action came from Sage's buffer).")
    with tabs[1]:
        if not r.llm_calls:
            st.caption("No model call at this step.")
        for i, c in enumerate(r.llm_calls, 1):
            st.markdown(f"**{i}. {c.purpose}** · {c.backend} `{c.model}` · {c.latency_s:.1f} s · "
                        f"{c.prompt_tokens} prompt + {c.completion_tokens} output tokens")
            st.caption("Prompt (exactly as sent)")
            st.code(c.prompt, language=None, wrap_lines=True, height=220)
            st.caption("Raw output" if not c.error else "Error")
            st.code(c.output if not c.error else c.error, language=None, wrap_lines=True)
    with tabs[2]:
        st.json(dataclasses.asdict(r), expanded=1)


def render_step_list(records: list[StepRecord], key: str) -> None:
    st.markdown("**Steps**")
    st.caption(WHAT["steps"])
    if not records:
        st.caption("No steps yet.")
        return
    shown = list(reversed(records))
    if len(shown) > LIST_PAGE and not st.toggle(f"Show all {len(shown)} steps", key=f"{key}_all"):
        shown = shown[:LIST_PAGE]
    for r in shown:
        with st.expander(step_summary(r), expanded=False):
            render_step_detail(r)


def render_episode(header: EpisodeHeader, records: list[StepRecord], t: int, summary: EpisodeSummary | None, *,
                   recorded: bool, next_hint: str | None = None) -> None:
    """Everything about step t of an episode, from its records only (live and recorded views share it)."""
    rec = records[t - 1] if t > 0 else None
    render_header(header, records, t, total=len(records) if recorded else None, next_hint=next_hint)
    render_alerts(rec, summary, at_end=(t == len(records)))
    render_observation(header, rec)
    render_timeline(header, records, t if recorded else None)
    left, right = st.columns(2)
    with left:
        render_plan(records, t)
    with right:
        render_buffer(rec)
    render_score(records, t if recorded else None)
    render_step_list(records[:t], key="run_list_rec" if recorded else "run_list_live")


# ----------------------------------------------------------------------------- live run: state + commands

S = st.session_state


def _set_cmd(name: str) -> None:
    S["run_cmd"] = name
    if name in ("reset", "step", "pause"):
        S["run_running"] = False
    elif name == "run_n":
        S["run_running"], S["run_left"] = True, int(S.get("run_n_steps", 5))
    elif name == "run_end":
        S["run_running"], S["run_left"] = True, None


def _settings_key(s: dict[str, Any]) -> tuple:
    factory = S.get("agent_factory")
    return (s["preset"], s["backend"], s["embedded_model"], s["base_url"], s["llm_model"], s["llm_timeout"],
            s["llm_threads"], s["step_limit"], id(factory) if factory else None)


def _build_config(s: dict[str, Any]) -> Config:
    cfg = preset(s["preset"])
    return apply_overrides(cfg, {"llm.backend": s["backend"], "llm.embedded_model": s["embedded_model"],
                                 "llm.base_url": s["base_url"], "llm.model": s["llm_model"],
                                 "llm.timeout_s": s["llm_timeout"], "llm.n_threads": s["llm_threads"],
                                 "env.step_limit": s["step_limit"]})


def _fail(msg: str) -> None:
    S["run_error"] = msg
    S["run_running"] = False


def _lock() -> threading.Lock:
    """One lock per browser session around the agent: Streamlit starts a new script run as soon as the
    user clicks anything, even while an older run is still inside a slow step; the lock keeps the two
    from driving the agent at once."""
    return S.setdefault("run_lock", threading.Lock())


def wait_for_step_in_flight() -> None:
    lock = _lock()
    if lock.locked():
        with st.status("A step is still running (probably a slow model call); the page updates when it "
                       "finishes...") as status:
            while not lock.acquire(timeout=0.5):
                pass
            lock.release()
            status.update(label="The step in progress has finished.", state="complete")


def do_reset(s: dict[str, Any]) -> None:
    try:
        catalog().check_variation(s["task"], int(s["variation"]), s["split"])
        if s["backend"] == "openai" and not s["base_url"].strip():
            raise ValueError("enter the URL of the OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1)")
        cfg = _build_config(s)
    except ValueError as e:
        return _fail(f"Cannot start: {e}")
    key = _settings_key(s)
    try:
        with _lock():
            agent = S.get("run_agent")
            if agent is None or S.get("run_agent_key") != key:
                if agent is not None:
                    try:
                        agent.close()
                    except Exception:  # noqa: BLE001 - the old agent is going away anyway
                        log.exception("closing the previous agent")
                S["run_agent"] = S["run_header"] = None
                with st.status("Loading the agent (Swift model, LLM backend)...") as status:
                    factory = S.get("agent_factory") or _product_agent
                    agent = factory(cfg)
                    S["run_agent"], S["run_agent_key"] = agent, key
                    status.update(label="Agent ready", state="complete")
            with st.status(f"Starting ScienceWorld: {s['task']}, variation {s['variation']} "
                           f"({s['split']})...") as status:
                S["run_header"] = None
                S["run_header"] = agent.start(s["task"], int(s["variation"]), s["split"])
                S["run_error"] = None
                status.update(label=f"Episode started: {s['task']} variation {s['variation']}", state="complete")
    except Exception as e:  # noqa: BLE001 - a JVM / model failure must show up, not crash the page
        log.exception("reset failed")
        _fail(f"Reset failed: {type(e).__name__}: {e}")


def _after_step(agent) -> None:
    """Bookkeeping of a finished step (no Streamlit calls: it must not be interrupted)."""
    S["run_error"] = None
    if S.get("run_running"):
        left = S.get("run_left")
        if left is not None:
            S["run_left"] = left - 1
            if S["run_left"] <= 0:
                S["run_running"] = False
    if agent.done:
        S["run_running"] = False


def do_step() -> None:
    agent, header = S.get("run_agent"), S.get("run_header")
    if agent is None or header is None:
        return _fail("No episode yet: choose a task and press **Reset**.")
    if agent.done:
        S["run_running"] = False
        st.toast("The episode is over: press Reset to start another.")
        return
    buffered = len(agent.state.buffer) if agent.state.mode == "sage" else 0
    label = (f"Sage's plan: taking the next buffered action ({buffered} pending)..." if buffered else
             "Swift is choosing... (if a switching rule fires, Sage is called: an LLM call)")
    deferred: list[BaseException] = []
    with st.status(f"Step {len(agent.records) + 1}: {label}", expanded=False) as status:
        calls = [0]

        def announce() -> None:
            calls[0] += 1
            what = "planning Q1-Q5" if calls[0] == 1 else "turning the plan into actions"
            try:
                status.update(label=f"Step {len(agent.records) + 1}: Sage is thinking (LLM call {calls[0]}: "
                                    f"{what})... a slow model takes up to a minute")
            except BaseException as e:  # noqa: BLE001 - a rerun/stop request waits until the step is recorded
                deferred.append(e)

        llm = getattr(agent, "llm", None)
        rec, error = None, None
        with _lock():  # nothing in here may call Streamlit except announce(), which defers interruptions
            if agent.done:  # another run finished the episode while this one waited
                S["run_running"] = False
            else:
                if hasattr(llm, "on_call"):
                    llm.on_call = announce
                try:
                    rec = agent.step()
                    _after_step(agent)
                except Exception as e:  # noqa: BLE001 - show it, stop running, keep the page alive
                    log.exception("step failed")
                    error = f"Step failed: {type(e).__name__}: {e}"
                    _fail(error)
                finally:
                    if hasattr(llm, "on_call"):
                        llm.on_call = None
        if error:
            status.update(label=error, state="error")
        elif rec is not None:
            status.update(label=f"Step {rec.step}: {actor_label(rec.system)} took '{rec.action}' "
                                f"({rec.timings.get('total', 0):.1f} s)", state="complete")
        else:
            status.update(label="The episode is over: press Reset to start another.", state="complete")
    if deferred:
        raise deferred[0]


def next_hint(agent) -> str | None:
    if agent is None or agent.done:
        return None
    if agent.state.mode == "sage" and agent.state.buffer:
        return f"Next step: Sage's buffer ({len(agent.state.buffer)} action(s) pending)."
    return "Next step: Swift proposes; Sage takes over if a switching rule fires."


# ----------------------------------------------------------------------------- sidebar

def live_sidebar() -> dict[str, Any]:
    cat = catalog()
    names = cat.names()
    task = st.selectbox("Task", names, key="run_task", format_func=lambda n: f"{cat.get(n).index}: {n}",
                        help="One of ScienceWorld's 30 science tasks.")
    info = cat.get(task)
    st.caption(f"**{info.title}** ({info.topic}). {info.description}")
    S.setdefault("run_split", "test")
    split = st.selectbox("Split", SPLITS, key="run_split",
                         help="Variations are split into train (Swift learned from them), dev and test "
                              "(never seen in training; used for scoring).")
    options = info.variations(split)
    if S.get("run_variation") not in options and options:
        S["run_variation"] = options[0]
    variation = st.selectbox("Variation", options, key="run_variation",
                             help=f"The {len(options)} {split} variations of this task (objects and rooms differ).")
    names_p = list(PRESETS)
    pre = st.selectbox("Preset", names_p, key="run_preset", format_func=lambda p: p,
                       help="Which modules are on (Configurations page has every number).")
    st.caption(PRESETS[pre][0])
    backend = st.selectbox("LLM backend (Sage)", ["embedded", "openai"], key="run_backend",
                           format_func=lambda b: {"embedded": "embedded (offline, on this CPU)",
                                                  "openai": "OpenAI-compatible server (vLLM, Ollama, ...)"}[b],
                           help="Which language model plays Sage.")
    emb_keys = list(EMBEDDED_MODELS)
    emb, base_url, model = LLMConfig().embedded_model, LLMConfig().base_url, ""
    if backend == "embedded":
        S.setdefault("run_emb_model", DEFAULT_EMBEDDED)
        emb = st.selectbox("Embedded model", emb_keys, key="run_emb_model",
                           format_func=lambda k: EMBEDDED_MODELS[k].title,
                           help="Qwen2.5-Coder-1.5B plans coherently but takes ~40-60 s per Sage call on a "
                                "laptop CPU; SmolLM2-135M answers in seconds but its plans are poor.")
    else:
        S.setdefault("run_base_url", LLMConfig().base_url)
        base_url = st.text_input("Server URL", key="run_base_url",
                                 help="The /v1 address of an OpenAI-compatible server, e.g. vLLM's.")
        model = st.text_input("Model name", key="run_llm_model",
                              help="The model name the server serves (empty: the server's default).")
    d_llm, d_env = LLMConfig(), Config().env
    S.setdefault("run_llm_timeout", int(d_llm.timeout_s))
    S.setdefault("run_llm_threads", d_llm.n_threads)
    S.setdefault("run_step_limit", d_env.step_limit)
    with st.expander("Advanced"):
        timeout = st.number_input("Sage call timeout (s)", min_value=5, max_value=1800,
                                  key="run_llm_timeout", help="A model call that takes longer is stopped and recorded "
                                  "as an error; the agent then falls back to Swift's action (`llm.timeout_s`).")
        threads = st.number_input("LLM CPU threads (embedded)", min_value=1, max_value=64,
                                  key="run_llm_threads", help="Threads llama.cpp uses (`llm.n_threads`). On a busy "
                                  "machine fewer threads can be faster.")
        limit = st.number_input("Step limit", min_value=1, max_value=1000,
                                key="run_step_limit", help="The episode ends after this many steps "
                                "(`env.step_limit`, 100 in the paper's protocol).")
    return {"task": task, "split": split, "variation": variation, "preset": pre, "backend": backend,
            "embedded_model": emb, "base_url": base_url, "llm_model": model, "llm_timeout": float(timeout),
            "llm_threads": int(threads), "step_limit": int(limit)}


def live_buttons() -> None:
    c1, c2 = st.columns(2)
    c1.button("Reset", key="run_reset", type="primary", on_click=_set_cmd, args=("reset",), width="stretch",
              help="Start a new episode with the settings above (a new recorded trace).")
    c2.button("Step", key="run_step", on_click=_set_cmd, args=("step",), width="stretch",
              help="Take one environment step.")
    S.setdefault("run_n_steps", 5)
    n = st.number_input("N steps", min_value=1, max_value=100, key="run_n_steps",
                        help="How many steps 'Run N' takes (it stops earlier when the episode ends).")
    c3, c4 = st.columns(2)
    c3.button(f"Run {int(n)} steps", key="run_run_n", on_click=_set_cmd, args=("run_n",), width="stretch")
    c4.button("Run to end", key="run_run_end", on_click=_set_cmd, args=("run_end",), width="stretch",
              help="Step until the episode ends (success, failure, or the step limit).")
    st.button("Pause", key="run_pause", on_click=_set_cmd, args=("pause",), width="stretch",
              help="Stop running after the step in progress.")
    if S.get("run_running"):
        left = S.get("run_left")
        st.caption(f"Running{'' if left is None else f': {left} step(s) left'}... press Pause to stop.")


# ----------------------------------------------------------------------------- recorded episodes

@st.cache_data(show_spinner=False, max_entries=16)
def _load_episode(path: str, mtime: float, size: int):
    return read_episode(path)


_RUN_ID = re.compile(r"^(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})-(.+)-v(\d+)-(.+)-[0-9a-f]{6}$")


def _trace_label(p: str) -> str:
    """'boil v21 · baseline · 2026-11-30 05:57 (runs)' from the run id the agent puts in the file name."""
    path = Path(p)
    where = "examples" if path.resolve().is_relative_to(EPISODES_DIR.resolve()) else "runs"
    m = _RUN_ID.match(path.stem)
    if not m:
        return f"{path.stem} ({where})"
    y, mo, d, h, mi, _s, task, var, pre = m.groups()
    return f"{task} v{var} · {pre} · {y}-{mo}-{d} {h}:{mi} ({where})"


def recorded_view() -> None:
    traces = [str(p) for p in list_traces(RUNS_DIR, EPISODES_DIR)]
    with st.sidebar:
        if not traces:
            st.info(f"No recorded episodes yet in `{RUNS_DIR}` or `{EPISODES_DIR}`. Every live "
                    f"run is recorded: run one first.")
            return
        if S.get("run_trace") not in traces:
            S["run_trace"] = traces[0]
        path = st.selectbox("Recorded episode", traces, key="run_trace", format_func=_trace_label,
                            help="Traces in runs/ (your live runs) and assets/episodes/ (examples), newest first.")
    try:
        p = Path(path)
        stat = p.stat()
        ep = _load_episode(path, stat.st_mtime, stat.st_size)
    except TraceError as e:
        st.error(f"This trace cannot be read: {e}. Choose another episode.")
        return
    except (OSError, ValueError) as e:
        st.error(f"Cannot open {path}: {e}")
        return
    if ep.truncated_tail:
        line_no, text = ep.truncated_tail
        st.warning(f"The last line ({line_no}) of this trace is half-written (the run crashed or is still being "
                   f"written); showing the {len(ep.steps)} complete steps before it.")
    n = len(ep.steps)
    with st.sidebar:
        if S.get("run_rec_loaded") != path:
            S["run_rec_loaded"] = path
            S["run_rec_step"] = 0
        S["run_rec_step"] = min(max(int(S.get("run_rec_step", 0)), 0), n)
        if n:
            st.slider("Step", 0, n, key="run_rec_step",
                      help="Scrub through the recorded steps; 0 is the start state. No model is called.")
            c1, c2 = st.columns(2)
            c1.button("◀ Previous", key="run_rec_prev", width="stretch",
                      on_click=lambda: S.__setitem__("run_rec_step", max(0, S["run_rec_step"] - 1)))
            c2.button("Next ▶", key="run_rec_next", width="stretch",
                      on_click=lambda: S.__setitem__("run_rec_step", min(n, S["run_rec_step"] + 1)))
        else:
            st.caption("This episode has no steps yet.")
        st.caption(WHAT["recorded"])
    t = int(S.get("run_rec_step", 0))
    render_episode(ep.header, ep.steps, t, ep.summary, recorded=True)


# ----------------------------------------------------------------------------- the page

# Streamlit forgets a widget's value when a run does not draw it (e.g. while the recorded view is shown);
# writing the values back keeps the live settings across a trip to the recorded view and back.
for _k in ("run_task", "run_split", "run_variation", "run_preset", "run_backend", "run_emb_model", "run_base_url",
           "run_llm_model", "run_llm_timeout", "run_llm_threads", "run_step_limit", "run_n_steps", "run_trace"):
    if _k in S:
        S[_k] = S[_k]

st.title("SwiftSage Explorer: Run")
st.caption(WHAT["page"])

with st.sidebar:
    st.header("Run")
    source = st.radio("Source", ["Live run", "Recorded episode"], key="run_source", horizontal=True,
                      help="Run the agent now, or replay an episode recorded earlier.")

if source == "Recorded episode":
    S["run_running"] = False
    recorded_view()
else:
    with st.sidebar:
        settings = live_sidebar()
        live_buttons()
        agent = S.get("run_agent")
        if agent is not None and S.get("run_header") is not None and S.get("run_agent_key") != _settings_key(settings):
            st.info("Settings changed: press Reset to start a new episode with them.")
    wait_for_step_in_flight()
    cmd = S.pop("run_cmd", None)
    if cmd == "reset":
        do_reset(settings)
    elif cmd == "step":
        do_step()
    elif S.get("run_running"):
        do_step()
    if S.get("run_error"):
        st.error(S["run_error"])
    agent, header = S.get("run_agent"), S.get("run_header")
    if agent is None or header is None:
        st.info("Choose a task, a variation and a preset in the sidebar, then press **Reset** to start an "
                "episode and **Step** to watch the agent act. Or switch the source to *Recorded episode* to "
                "replay one.")
    else:
        records = list(agent.records)
        render_episode(header, records, len(records), agent.summary, recorded=False, next_hint=next_hint(agent))
        if agent.trace_path is not None:
            st.caption(f"Recorded to `{agent.trace_path}`: open it later under *Recorded episode*.")
    if S.get("run_running") and agent is not None and not agent.done:
        time.sleep(0.05)  # let the browser draw this step before the next one starts
        st.rerun()
