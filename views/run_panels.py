"""The Run page's panels of one step, and the step list, drawn from (header, records, t) only.

t is the step shown (0 = the start state, records[t - 1] is its record). A live run passes the records its
agent has written so far, a recorded episode the records read back from its trace; nothing here touches
the agent, so a recorded step renders without calling any model.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Sequence

import streamlit as st

from agent_core.config import ControllerConfig
from agent_core.trace import EpisodeHeader, EpisodeSummary, StepRecord
from views.charts import score_figure, timeline_figure
from views.common import (MAPPING_WORDS, QUESTIONS, WHAT, actor_color, actor_label, badge, buffer_sources, chip,
                          clip, code, decision_rows, episode_mechanisms, html_block_text, md_code, md_text, record_at)
from agent_core.provenance import describe_code
from views.memory_panels import render_memory, render_memory_detail
from views.narration import narrate, narration_track
from views.srm_panels import render_critic_raw, render_srm, render_srm_detail

LIST_PAGE = 20  # steps per page of the step list (a 1,000-step episode is 50 pages, never 1,000 expanders)
TRACK_WINDOW = 30  # narration lines shown on each side of the current step


def records_key(records: list[StepRecord]) -> tuple:
    """What the charts draw from each record: equal keys draw equal figures (cheap to compute, ~1 ms per 1,000
    steps)."""
    return tuple((r.step, r.system, r.action, r.score, r.reward, r.replayed, r.trigger.name if r.trigger else None,
                  sum(1 for g in r.gate1 if g.decision == "DROP"), r.stagnation is not None, r.critic is not None)
                 for r in records)


@st.cache_resource(show_spinner=False, max_entries=256)
def _figure(kind: str, run_id: str, key: int, cursor: int | None, mechanisms: tuple[str, ...],
            _records: list[StepRecord], hits: tuple[int, ...] = (), branches_key: str = "",
            _branches: tuple = ()) -> Any:
    if kind == "timeline":
        return timeline_figure(_records, cursor, mechanisms=mechanisms, hits=hits)
    return score_figure(_records, cursor, branches=_branches)


def shared_figure(kind: str, header, records: list[StepRecord], cursor: int | None,
                  mechanisms: tuple[str, ...] = ("swift", "sage"), hits: tuple[int, ...] = (),
                  branches: Sequence[dict] = ()) -> Any:
    """The timeline or score figure, built once per server for every browser showing the same steps (thirty
    students following one run draw it once, not thirty times). Callers only read the figure."""
    return _figure(kind, getattr(header, "run_id", ""), hash(records_key(records)), cursor, mechanisms, records,
                   hits, json.dumps(list(branches), sort_keys=True), tuple(branches))


# ----------------------------------------------------------------------------- words from records

def rules(config: dict[str, Any]) -> list[str]:
    """The switching rules in words with their numbers, from the run's own configuration."""
    c = config.get("controller", {}) if isinstance(config, dict) else {}
    w = c.get("stuck_window", 5)
    limit = c.get("buffer_fail_limit", 3)
    # the numbers and phrases are the recorded run's (its header), so they are escaped like any trace text
    prefixes = md_text(", ".join(f"'{p} ...'" for p in c.get("critical_prefixes", ["focus on"])))
    markers = c.get("unexpected_markers", [])
    sw = config.get("swift", {}) if isinstance(config, dict) else {}
    if c.get("invalid_rule", "top1") == "top1":
        invalid = "**invalid**: Swift's top action is not valid in the current state (`controller.invalid_rule = top1`)"
    else:
        invalid = (f"**invalid**: Swift rates no valid action at least {c.get('invalid_min_score', -1.5):g} "
                   f"(mean log-probability per token; `controller.invalid_rule = ranked`)")
    critical = f"**critical**: Swift proposes a key decision ({prefixes}) that can end the task"
    if c.get("critical_review", "always") == "off":
        critical = (f"**critical**: off: a key decision ({prefixes}) is Swift's own, and no focus goes to Sage "
                    f"(`controller.critical_review = off`)")
    elif c.get("critical_review", "always") == "unsure":
        m = sw.get("focus_margin", 0.0)
        critical += (f", and it is unsure which object: its probability margin between the two likeliest focus "
                     f"targets in view is below {m:g} (`swift.focus_margin`); a sure focus is taken without Sage")
    return [
        f"**stuck**: the rewards of the last {md_text(w)} steps sum to 0 ({md_code(f'controller.stuck_window = {w}')})",
        invalid,
        critical,
        f"**unexpected**: the last observation reports a failure or anomaly ({len(markers)} phrases such as "
        f"{md_text(', '.join(repr(m) for m in markers[:3]))})",
        "**buffer_empty**: back to Swift when Sage's action buffer is empty",
        f"**buffer_failed**: back to Swift when {md_text(limit)} buffered actions fail in a row "
        f"({md_code(f'controller.buffer_fail_limit = {limit}')})",
    ] + ([f"**swift_forced**: after {md_text(streak)} Sage calls in a row with no step of Swift's own between them, "
          f"Swift acts once whatever fired ({md_code(f'controller.sage_streak_limit = {streak}')}"
          + ("" if c.get("critical_review", "always") == "off" else
             "; a focus Swift is unsure of becomes its best other action") + ")"]
         if (streak := c.get("sage_streak_limit", 0)) else [])


def consequence(rec: StepRecord) -> str:
    """What the switch led to at this step, in words."""
    if rec.trigger is None:
        return ""
    if rec.trigger.name in ("buffer_empty", "buffer_failed"):
        return "Control went back to Swift."
    if rec.trigger.name == "swift_forced":
        ev = rec.trigger.evidence
        n = ev.get("sage_calls_in_a_row", ControllerConfig().sage_streak_limit)
        return (f"Sage was not called ({md_text(', '.join(map(str, ev.get('set_aside', []))))} set aside): after "
                f"{md_text(n)} Sage calls in a row, Swift acted once.")
    if any(c.purpose == "focus_review" for c in rec.llm_calls) and not any(c.error for c in rec.llm_calls):
        return ("Sage compared the focus targets in view and chose this one." if rec.system == "sage" else
                "Sage compared the focus targets in view and found none right yet, so Swift's best other action "
                "was taken.")
    if rec.system == "sage":
        return "Sage was called: it planned, filled the action buffer, and this step's action is the first one."
    if rec.system == "critic":
        return "This step's action comes from the buffer the Critic filled."
    if any(c.error for c in rec.llm_calls):
        return "Sage was called but its model call failed, so Swift's action was taken."
    deferred = next((d for d in rec.decisions if d.kind == "sage_fallback" and d.reason == "deferred"), None)
    if deferred is not None:
        return f"Sage was called but deferred to Swift ({md_text(deferred.error)}), so Swift's action was taken."
    return "Sage was called but none of its actions fitted the game, so Swift's action was taken."


def plan_step(records: list[StepRecord], t: int) -> int | None:
    """The step at which the plan shown at step t was written (its last successful planning call)."""
    for r in reversed(records[:t]):
        if any(c.purpose == "plan" and not c.error for c in r.llm_calls):
            return r.step
    return None


def consumed_from(rec: StepRecord) -> str:
    """Where this step's action came from, in words."""
    if rec.system == "sage":
        return "taken from Sage's buffer"
    if rec.system == "critic":
        return "taken from the buffer the Critic filled"
    return f"chosen by {actor_label(rec.system)}"


def step_summary(r: StepRecord) -> str:
    """The one-line label of a step in the step list."""
    parts = [f"Step {r.step}", md_text(actor_label(r.system)), md_text(r.action), f"score {r.score:g} ({r.reward:+g})"]
    if r.trigger:
        parts.append(f"⚡ {md_text(r.trigger.name)}")
    drops = sum(g.decision == "DROP" for g in r.gate1)
    if drops:
        parts.append(f"✗ Gate-1 dropped {drops}")
    if r.menu:
        parts.append("menu")
    if r.stagnation:
        parts.append("◆ stagnation")
    if r.critic:
        parts.append("● Critic " + {"called": "called", "failed": "call failed", "waiting": "waiting"}.get(
            r.critic.status, "skipped"))
    if any(c.error for c in r.llm_calls):
        parts.append("⚠ LLM error")
    if r.action_valid is False:
        parts.append("✗ not valid")
    return " · ".join(parts)


# ----------------------------------------------------------------------------- panels of step t

def render_header(header: EpisodeHeader, records: list[StepRecord], t: int, *, total: int | None = None,
                  next_hint: str | None = None) -> None:
    rec = record_at(records, t)
    system = rec.system if rec else "swift"
    models = header.models or {}
    st.markdown(f"### Step {t} · {md_text(header.task)} (variation {md_text(header.variation)}, "
                f"{md_text(header.split)})")
    st.caption(f"**Task:** {md_text(header.task_description)}")
    c1, c2, c3, c4 = st.columns([1, 1, 1, 2])
    c1.metric("Step" if total is None else f"Step (of {total})", str(t),
              help="Environment steps taken so far (0 = the start state).")
    c2.metric("Score", f"{rec.score:g}" if rec else "0", delta=f"{rec.reward:+g}" if rec and rec.reward else None,
              help="The game's score, 0-100 (cumulative); below 0 means the task failed.")
    c3.markdown("**Mode**<br>" + badge(system), unsafe_allow_html=True,
                help="Which system chose this step's action: Swift (fast model), Sage (slow LLM planner) or "
                     "the Critic (self-reflection's LLM, through the buffer).")
    preset = header.config.get('preset', '?') if isinstance(header.config, dict) else '?'
    c4.caption(f"preset **{md_text(preset)}** · Swift: {md_code(models.get('swift', '?'))} · "
               f"Sage: {md_code(models.get('sage', '?'))} · run {md_code(header.run_id)} · running: "
               f"{md_text(', '.join(map(str, episode_mechanisms(header))))} · code "
               f"{md_text(describe_code(header.code, header.run_id))}"
               + (f" · config {md_code(header.config_hash)}" if header.config_hash else ""))
    if next_hint:
        c4.caption(next_hint)


def render_alerts(header: EpisodeHeader, records: list[StepRecord], t: int,
                  summary: EpisodeSummary | None) -> None:
    """What the user must not miss at this step: why control switched, model failures, JVM events."""
    rec = record_at(records, t)
    if rec is None:
        return
    if rec.trigger:
        st.info(f"**Why did control switch?** Rule **{md_text(rec.trigger.name)}** fired: {md_text(rec.trigger.rule)}. "
                f"{consequence(rec)}", icon="⚡")
    for c in rec.llm_calls:
        if c.failure() == "cancelled":  # Pause stopped it: the user's choice, not a failure
            whose = "Sage's" if c.purpose in ("plan", "ground", "focus_review") else "the"
            st.info(f"Pause stopped {whose} {md_text(c.purpose)} call ({md_text(c.error.split('] ')[-1])}); the step "
                    f"went on without it" + (", with Swift's action." if whose == "Sage's" else "."), icon="⏸️")
        elif c.error:
            who = md_text(f"{c.backend} {c.model}".strip())
            if c.purpose in ("plan", "ground", "focus_review"):
                st.error(f"Sage's LLM call ({md_text(c.purpose)}, {who}) failed at this step, so the agent fell back "
                         f"to Swift's action. The error: {md_text(c.error)}")
            else:  # the Critic, the importance rater, ...: the step itself went on as usual
                st.error(f"The {md_text(c.purpose)} LLM call ({who}) failed at this step. The error: {md_text(c.error)}")
    for ev in rec.env_events:
        st.warning(f"ScienceWorld: {md_text(ev.kind)}: {md_text(ev.detail)}")
    if rec.failed:
        st.error(f"The task failed at this step (score {rec.score:g}).")
    if t == len(records) and summary is not None:
        text = (f"Episode over: **{md_text(summary.reason)}** after {md_text(summary.steps)} steps, final score "
                f"{summary.final_score:g}." + (f" Error: {md_text(summary.error)}" if summary.error else ""))
        (st.success if summary.success else st.warning)(text)


def render_observation(header: EpisodeHeader, records: list[StepRecord], t: int) -> None:
    rec = record_at(records, t)
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
                st.markdown(f"**>** {md_code(rec.action)} ({md_text(actor_label(rec.system))}){mark}")
                st.text(rec.observation)
    with c2:
        st.markdown(f"**Look around**{' · ' + md_text(rec.room) if rec and rec.room else ''}")
        st.caption(WHAT["look"])
        with st.container(border=True, height=230):
            st.text(rec.look if rec else header.initial_look)
    with c3:
        st.markdown("**Inventory**")
        st.caption(WHAT["inv"])
        with st.container(border=True, height=230):
            st.text(rec.inventory if rec else header.initial_inventory)


def render_timeline(header: EpisodeHeader, records: list[StepRecord], t: int, *, cursor: int | None,
                    hits: tuple[int, ...] = ()) -> None:
    st.markdown("**Mode timeline: who acted at each step**")
    st.caption(WHAT["timeline"])
    if not records:
        st.caption("No steps yet: the agent starts with Swift.")
    else:
        fig = shared_figure("timeline", header, records, cursor, tuple(episode_mechanisms(header)), hits)
        st.plotly_chart(fig, key="run_timeline_chart", width="stretch", config={"displayModeBar": False})
        switches = [r for r in records[:t] if r.trigger][-3:]
        if switches:
            st.caption("Latest switches: " + "; ".join(f"step {r.step}: **{md_text(r.trigger.name)}** "
                                                       f"({md_text(r.trigger.rule)})" for r in reversed(switches)))
    with st.expander("The switching rules (when Swift hands control to Sage, and back)"):
        st.caption("The agent starts with Swift. Before each Swift action it checks these rules; the first that "
                   "holds calls Sage, whose buffered actions then run until the buffer is empty or fails.")
        st.markdown("\n".join(f"- {r}" for r in rules(header.config)))


def render_plan(header: EpisodeHeader, records: list[StepRecord], t: int) -> None:
    st.markdown("**Sage's current plan (Q1-Q5)**")
    st.caption(WHAT["plan"])
    rec = record_at(records, t)
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
        st.markdown(f"**{q}. {question}**  \n{md_text(answer) if answer else '*(no answer)*'}")


def _pending_line(i: int, action: str, source: str) -> str:
    """One pending buffer item; the Critic's are marked in its colour (Sage's are the default). For markdown with
    unsafe_allow_html: the action is entity- and backslash-escaped inside <code> (views.common.code)."""
    mark = f" {chip('from the Critic', actor_color('critic'))}" if source == "critic" else ""
    return f"{i}. {code(action)}{mark}"


def render_buffer(header: EpisodeHeader, records: list[StepRecord], t: int) -> None:
    st.markdown("**Action buffer**")
    st.caption(WHAT["buffer"])
    rec = record_at(records, t)
    if rec is None:
        st.caption("Empty: nothing planned yet.")
        return
    st.markdown(f"**Consumed this step:** {md_code(rec.action)} ({md_text(consumed_from(rec))})")
    if rec.buffer_after:
        items = zip(rec.buffer_after, buffer_sources(rec))
        st.markdown("**Pending** (next first):\n" + "\n".join(_pending_line(i, a, s) for i, (a, s) in
                                                              enumerate(items, 1)), unsafe_allow_html=True)
    else:
        st.markdown("**Pending:** *(empty: Swift proposes the next action)*")
    if rec.buffer_before and rec.buffer_before != rec.buffer_after:
        st.caption("Buffer when this step began: " + " → ".join(md_code(a) for a in rec.buffer_before))
    if rec.mappings:
        st.markdown("**Mapped onto valid actions:**")
        # st.table renders each cell as markdown (Streamlit 1.67): the recorded words are escaped
        st.table([{"planned": md_text(m.raw), "mapped to": md_text(m.mapped) if m.mapped else "—",
                   "how": md_text(m.method),  # wraps, never clips
                   "similarity": "—" if m.similarity is None else f"{m.similarity:.2f}",
                   "why not": md_text(m.reason or "")}
                  for m in rec.mappings], hide_index=True)
        st.caption(" · ".join(f"**{k}**: {v}" for k, v in MAPPING_WORDS.items()))


def render_score(header: EpisodeHeader, records: list[StepRecord], t: int, *, cursor: int | None,
                 roads: Callable[[], Sequence[dict]] | None = None) -> None:
    """The score chart; `roads` (views.roads) draws its panel below the chart and gives the branches to draw."""
    st.markdown("**Score trajectory**")
    st.caption(WHAT["score"])
    if not records:
        st.caption("No steps yet.")
        return
    chart = st.container()
    branches = list(roads()) if roads is not None else []
    with chart:
        st.plotly_chart(shared_figure("score", header, records, cursor, branches=branches), key="run_score_chart",
                        width="stretch", config={"displayModeBar": False})


# ----------------------------------------------------------------------------- the step list

# what a call found of its agent's prompt cache on the shared model (agent_core.llm.embedded._take), when it matters
_CACHE_NOTES = {
    "restored": "Another session used the model before this call; this run's cache was given back as it was, so "
                "the answer is the one it would get alone.",
    "lost": "Other sessions used the model for so long that this run's cache was dropped: the prompt was read whole, "
            "and the answer may differ from the same run played alone.",
}


def _render_prompts(r: StepRecord) -> None:
    """Each model call's exact prompt and raw output; the Critic's too when it is not among them."""
    critic_logged = any(c.purpose == "critic" for c in r.llm_calls)
    if not r.llm_calls and not (r.critic and r.critic.prompt):
        st.caption("No model call at this step.")
    scored = any(d.kind == "option_scores" for d in r.decisions)
    for i, c in enumerate(r.llm_calls, 1):
        read = "option" if scored and c.purpose in ("ground", "focus_review") else "output"  # scored, not written
        cache = (f" ({c.prompt_tokens - c.cached_tokens} read afresh, {c.cached_tokens} from the model's cache)"
                 if c.cached_tokens else "")
        st.markdown(f"**{i}. {md_text(c.purpose)}** · {md_text(c.backend)} {md_code(c.model)} · {c.latency_s:.1f} s · "
                    f"{c.prompt_tokens} prompt{cache} + {c.completion_tokens} {read} tokens"
                    + (f" · {c.cpu_threads} CPU thread{'s' if c.cpu_threads > 1 else ''}" if c.cpu_threads else ""))
        if c.cache_state in _CACHE_NOTES:
            st.caption(_CACHE_NOTES[c.cache_state])
        st.caption("Prompt (exactly as sent)")
        st.code(c.prompt, language=None, wrap_lines=True, height=220)
        st.caption("Raw output" if not c.error else "Error")
        st.code(c.output if not c.error else c.error, language=None, wrap_lines=True)
    if r.critic and r.critic.prompt and not critic_logged:
        st.markdown(f"**Critic** · {r.critic.latency_s:.1f} s")
        render_critic_raw(r.critic)


def render_step_detail(header: EpisodeHeader, r: StepRecord) -> None:
    """One step in full: the switch and its evidence, self-reflection, notes, then tabs for the raw parts."""
    st.markdown(f"**Action** {md_code(r.action)} by {md_text(actor_label(r.system))} → room "
                f"*{md_text(r.room or '?')}*, score {r.score:g} ({r.reward:+g}){' · done' if r.done else ''}")
    st.text(clip(r.observation, 600))
    if r.trigger:
        st.markdown(f"⚡ **Switch: {md_text(r.trigger.name)}** ({md_text(r.trigger.rule)})")
        if r.trigger.evidence:
            st.caption("Evidence: " + md_text(clip(json.dumps(r.trigger.evidence, default=str), 300)))
    for c in r.llm_calls:
        if c.error:
            st.error(f"LLM call {md_text(c.purpose)} failed: {md_text(c.error)}")
    render_srm_detail(header, r)
    rows = decision_rows(r)
    if rows:
        st.markdown("**Decisions in this step** (typed records, in the order taken):\n" +
                    "\n".join(f"- *{md_text(label)}*: {md_text(text)}" for label, text in rows))
    for d in r.decisions:
        if d.kind == "option_scores" and d.options:
            pmi = getattr(d, "rule", "mean") == "pmi" and len(d.reply) == len(d.options)
            st.markdown(f"**Sage's options, scored** ({'focus review' if d.purpose == 'focus_review' else 'pick'}): "
                        + ("how much more likely the model finds each option as its reply after its plan than as a "
                           "command on its own (log-probability after the plan, less its log-probability with no "
                           "task, state or plan); the best is played. " if pmi else
                           "the model's mean log-probability per token of each option as its reply; the best is played. ")
                        + "The order they were offered in plays no part.")
            st.dataframe([{"rank": i + 1, "option": o, "score": sc,
                           **({"after the plan": d.reply[i], "on its own": d.alone[i]} if pmi else {})}
                          for i, (o, sc) in enumerate(zip(d.options, d.scores))],
                         hide_index=True, width="stretch", height=min(36 * (len(d.options) + 1) + 4, 300))
    render_memory_detail(header, r)
    if r.timings:
        st.caption("Time: " + ", ".join(f"{md_text(k)} {v:.2f} s" for k, v in r.timings.items()))
    tabs = st.tabs(["Swift candidates", "Prompts & raw outputs", "Full record (JSON)"])
    with tabs[0]:
        if r.swift_candidates:
            st.caption(f"Swift's ranked guesses (log-probability; higher is surer). Unconstrained top-1: "
                       f"{md_code(r.swift_top1)}.")
            st.dataframe([{"action": c.action, "log-prob": c.score, "valid": c.valid} for c in r.swift_candidates],
                         hide_index=True, width="stretch")
            if r.swift_valid_ranked:
                st.caption("Best valid actions: " + ", ".join(md_code(c.action) for c in r.swift_valid_ranked[:5]))
        else:
            st.caption("Swift was not asked at this step (the action came from the buffer).")
        for who, unnamed in (("Swift", r.swift_focus_unnamed), ("Sage", r.sage_focus_unnamed)):
            if unnamed:
                st.caption(f"Not options for {who} (focus targets in view that the task does not name or names "
                           f"for later, and the rooms, doors, inventory and air, which no task focuses on): "
                           + ", ".join(md_code(a) for a in unnamed[:12])
                           + (f" and {len(unnamed) - 12} more" if len(unnamed) > 12 else ""))
    with tabs[1]:
        _render_prompts(r)
    with tabs[2]:
        st.json(dataclasses.asdict(r), expanded=1)


def render_step_list(header: EpisodeHeader, records: list[StepRecord], t: int, *, key: str,
                     lazy: bool = False) -> None:
    """Steps 1..t, newest first, each in an expander, LIST_PAGE a page (a selector picks the page)."""
    st.markdown("**Steps**")
    st.caption(WHAT["steps"])
    if t <= 0 or not records:
        st.caption("No steps yet.")
        return
    shown = list(reversed(records[:t]))
    pages = [shown[i:i + LIST_PAGE] for i in range(0, len(shown), LIST_PAGE)]
    if len(pages) > 1:
        page = st.selectbox(f"{len(shown)} steps, {LIST_PAGE} a page, newest first", range(len(pages)),
                            format_func=lambda p: f"steps {pages[p][0].step}-{pages[p][-1].step}", key=f"{key}_page")
        shown = pages[min(page or 0, len(pages) - 1)]
    for r in shown:
        if lazy:  # a step's detail is drawn only while its expander is open (a class of followers pays for none)
            box = st.expander(step_summary(r), expanded=False, key=f"{key}_x{r.step}", on_change="rerun")
            if box.open:
                with box:
                    _shared_step_detail(getattr(header, "run_id", ""), r.step,
                                        hash((r.action, r.score, r.observation)), header, r)
            continue
        with st.expander(step_summary(r), expanded=False):
            _shared_step_detail(getattr(header, "run_id", ""), r.step, hash((r.action, r.score, r.observation)),
                                header, r)


@st.cache_data(show_spinner=False, max_entries=4096)
def _shared_step_detail(run_id: str, step: int, fingerprint: int, _header: EpisodeHeader, _r: StepRecord) -> None:
    """A step's detail is drawn once per server and replayed to every browser that shows it (Streamlit replays the
    elements a cached function drew): a step record never changes once written."""
    render_step_detail(_header, _r)


# ----------------------------------------------------------------------------- the whole step

def render_narration(header: EpisodeHeader, records: list[StepRecord], t: int, recorded: bool) -> None:
    """The step in one or two plain sentences (views/narration.py: from the record alone, no model), and for a
    recorded episode the whole text track."""
    rec = record_at(records, t)
    if rec is None:
        st.caption("Narration: nothing has happened yet. Step the agent to hear what it does and why.")
        return
    # an HTML block (the body starts with <div>): markdown is not parsed inside it, so the narration (built from
    # the record's words) is HTML-escaped, on one line (a blank line would end the block), [ ] ` $ as entities
    st.markdown(f'<div class="swiftsage-narration" style="border-left: 4px solid {actor_color(rec.system)}; '
                f'padding: 0.4rem 0.8rem; margin: 0.3rem 0 0.8rem 0; font-size: 1.05rem;">🗣️ '
                f'{html_block_text(" ".join(narrate(rec, header)))}</div>', unsafe_allow_html=True)
    if recorded and len(records) > 1:
        # drawn only while open, and only the steps around this one: a 1,000-step episode would send its whole
        # text track with every move of the slider
        box = st.expander("Narration of the whole episode (text track)", key="run_track", on_change="rerun")
        if box.open:
            with box:
                lo, hi = max(0, t - TRACK_WINDOW), min(len(records), t + TRACK_WINDOW)
                st.caption("One line per step, generated from the step records; read it aloud while the episode "
                           "plays." + (f" Steps {lo + 1}-{hi} of {len(records)} (the exported HTML file has them all)."
                                       if hi - lo < len(records) else ""))
                window = records[lo:hi]
                st.markdown("\n".join(f"{'**' if r.step == t else ''}{md_text(line)}{'**' if r.step == t else ''}  "
                                       for r, line in zip(window, narration_track(window, header))))


def render_episode(header: EpisodeHeader, records: list[StepRecord], t: int, summary: EpisodeSummary | None, *,
                   recorded: bool, next_hint: str | None = None, lazy_steps: bool = False,
                   hits: tuple[int, ...] = (), roads: Callable[[], Sequence[dict]] | None = None) -> None:
    """Everything about step t of an episode, from its records only (live and recorded views share it); `hits`
    are the steps a search found, marked on the timeline."""
    cursor = t if recorded else None  # a dotted line marks the replayed step on both charts
    render_header(header, records, t, total=len(records) if recorded else None, next_hint=next_hint)
    render_narration(header, records, t, recorded=recorded)
    render_alerts(header, records, t, summary)
    render_observation(header, records, t)
    render_srm(header, records, t)
    render_memory(header, records, t)
    render_timeline(header, records, t, cursor=cursor, hits=hits)
    left, right = st.columns(2)
    with left:
        render_plan(header, records, t)
    with right:
        render_buffer(header, records, t)
    render_score(header, records, t, cursor=cursor, roads=roads)
    render_step_list(header, records, t, key="run_list_rec" if recorded else "run_list_live", lazy=lazy_steps)
