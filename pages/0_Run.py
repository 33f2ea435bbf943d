"""Run: watch the SwiftSage agent play ScienceWorld one step at a time, live or from a recorded trace.

This file is the page's layout. A live run is driven through session/ (live_run: Reset, Step, Run, Pause;
continue_run: fork and resume); everything drawn comes from step records only (agent_core.trace) through views/:
a live run shows the records its agent has written so far, a recorded episode the records read back from its
JSONL file, so replay is instant.

Tests drive the live view without slow models by putting a callable `cfg -> Agent` into
`st.session_state["agent_factory"]` before the first run; without it the page builds the real agent
(the trained Swift model and the chosen LLM backend).

Environment variables: SWIFTSAGE_RUNS_DIR (where live runs are recorded and looked up, default
runs/), SWIFTSAGE_DEFAULT_EMBEDDED_MODEL (the embedded LLM preselected in the sidebar, e.g.
smollm2-135m for a fast demo).
"""
from __future__ import annotations

import os
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # AppTest.from_file("pages/0_Run.py") runs this file on its own
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import streamlit as st  # noqa: E402

from session import continue_run, live_run  # noqa: E402
from session.agent_factory import settings_key  # noqa: E402
from session.llm import DEFAULT_EMBEDDED  # noqa: E402
from views import follow, render_episode, roads, share  # noqa: E402
from views.common import WHAT, md_code  # noqa: E402
from views.continue_boxes import fork_box, parent_line  # noqa: E402
from views.memory_panels import follow_open_request  # noqa: E402
from views.recorded_player import first_visit, follow_view, open_from_link, recorded_view  # noqa: E402
from views.run_sidebar import live_buttons, live_sidebar  # noqa: E402

S = st.session_state

first_visit()
open_from_link()
follow.open_from_link()
st.title("SwiftSage Explorer: Run")
if S.get("run_link_error"):
    st.error(S.pop("run_link_error"))
continue_run.do_continue()  # before the sidebar's widgets: a fork or resume sets their values (task, variation, preset)
st.caption(WHAT["page"])

with st.sidebar:
    st.header("Run")
    # a locked shared app has no live run: a visitor follows the teacher's run or replays recorded ones
    sources_shown = (["Live run"] if share.unlocked() else []) + ["Recorded episode", "Follow live"]
    if S.get("run_source") not in sources_shown:
        S["run_source"] = "Follow live" if S.get("run_source") == "Live run" else sources_shown[0]
    source = st.radio("Source", sources_shown, key="run_source", persist_state="session", horizontal=True,
                      help="Run the agent now, replay an episode recorded earlier, or follow the run being "
                           "recorded right now (the teacher's), step by step as it happens.")
    share.passcode_box()

run = live_run.session()
if source != "Follow live":
    follow.unregister()  # the server stops pushing new steps to this browser
if source == "Recorded episode":
    run.running = False
    recorded_view(on_fork=continue_run.request_fork, on_resume=continue_run.request_resume)
elif source == "Follow live":
    run.running = False
    follow_view()
else:
    with st.sidebar:
        settings = live_sidebar(DEFAULT_EMBEDDED)
        live_buttons(live_run.set_cmd, running=bool(run.running), left=run.left)
        changed_slot = st.empty()  # filled after this run's command: a Reset pressed now has used the settings
        fork_slot = st.container()  # after the command too: a quick step taken in this run is forkable
    live_run.wait_for_step_in_flight()
    if live_run.pop_paused_call():
        st.info("Paused. The model call in progress was stopped; that step took Swift's action instead and is "
                "recorded with the cancellation (see its LLM error). Press Step or Run to go on.")
    want_step = live_run.command(settings)
    was_running = bool(run.running)
    job = live_run.begin_step() if want_step else None  # a quick (Swift) step is taken before anything is drawn
    quick = job is not None and job.done
    if run.agent is not None and run.header is not None and run.agent_key != settings_key(settings):
        changed_slot.info("Settings changed: press Reset to start a new episode with them.")
    if run.agent is not None and run.header is not None and run.agent.trace_path is not None:
        with fork_slot:
            fork_box(str(run.agent.trace_path), types.SimpleNamespace(header=run.header,
                                                                     steps=list(run.agent.records)),
                     len(run.agent.records), on_fork=continue_run.request_fork)
    # the step's progress goes above the episode, which is drawn first: the last step stays readable (not
    # faded) while Swift or a model works on the next one
    progress_slot = st.container()
    if run.error:
        st.error(run.error)
    agent, header = run.agent, run.header
    if agent is None or header is None:
        st.info("Choose a task, a variation and a preset in the sidebar, then press **Reset** to start an "
                "episode and **Step** to watch the agent act. Or switch the source to *Recorded episode* to "
                "replay one.")
    else:
        records = list(agent.records)
        if header.parent:
            parent_line(header.parent, str(agent.trace_path))
        trace = agent.trace_path
        branch_view = (lambda: roads.branch_traces(roads.render_roads(
            str(trace), types.SimpleNamespace(header=header, steps=records), len(records)))) \
            if trace is not None and not run.running and job is None else None
        render_episode(header, records, len(records), agent.summary, recorded=False,
                       next_hint=live_run.next_hint(agent), roads=branch_view)
        if agent.trace_path is not None:
            st.caption(f"Recorded to {md_code(agent.trace_path)}: open it later under *Recorded episode*. The class "
                       f"follows it live at **{follow.class_link()}** (from another machine, use this machine's "
                       f"network address).")
    if job is not None and not quick and live_run.watch_step(job, progress_slot):
        st.rerun()  # draw the new step
    elif quick and (run.running or was_running):
        st.rerun()  # Run N / Run to end: the next step (or, after the last, the buttons without "Running...")
follow_open_request()  # "Open in the Memory explorer" was pressed in a Memory panel
