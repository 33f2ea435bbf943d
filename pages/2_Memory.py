"""Memory explorer: the Generative Agents memory stream the agent writes, and why a memory was retrieved.

Opens, by default, the store of the latest run that used memory (traces under SWIFTSAGE_RUNS_DIR, default
runs/), else SWIFTSAGE_MEMORY_DIR when set, else a read copy of the shipped warm store; the Run page's
"Open in the Memory explorer" button opens a run's store with one retrieval selected. Retrievals recorded
in traces (runs/, assets/episodes/) are shown exactly as recorded. This file is the page's layout; the panels
are in views/ (memory_explorer, memory_charts, reflection_tree). Works under `streamlit run app.py` (listed by
st.navigation) and standalone (AppTest.from_file("pages/2_Memory.py")); never calls st.set_page_config.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # standalone runs (AppTest) start with pages/ as the script dir
    sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from memory_store import seed_demo  # noqa: E402
from views import share  # noqa: E402
from views.common import md_code, md_text  # noqa: E402
from views.memory_charts import panel_projection, panel_recency_importance  # noqa: E402
from views.memory_explorer import (memory_frame, open_store, panel_query, panel_table, panel_trace,  # noqa: E402
                                   parse_result, render_retrieval)
from views.reflection_tree import panel_tree  # noqa: E402
from views.stores import default_store, is_store, resolve_store  # noqa: E402

S = st.session_state


def traces_only() -> None:
    """No store to show: the recorded retrievals still are."""
    st.subheader("Retrievals recorded in traces")
    panel_trace()
    st.stop()


st.title("Memory explorer")
st.caption("The agent's memory stream (Generative Agents): everything it observed, planned and concluded, and "
           "why a memory was retrieved: score = recency + importance + relevance, each scaled to 0-1.")

request = S.pop("mem_open_request", None)  # from the Run page's "Open in the Memory explorer"
if request and request.get("store"):
    if is_store(resolve_store(request["store"])):
        S["mem_dir"] = str(resolve_store(request["store"]))
    else:  # recorded elsewhere (a temporary store of the run that made an example): the trace still has it all
        request["missing_store"] = Path(request["store"]).name
    S["mem_opened_retrieval"] = request
default_dir, why_default = default_store()
if "mem_dir" not in S:
    S["mem_dir"] = default_dir
store_dir = st.text_input("Memory store directory", key="mem_dir",
                          help=f"A Chroma store written by the agent. Default: {why_default}.")
st.caption(f"Default: {why_default}.")
with st.sidebar:
    share.passcode_box()
opened = S.get("mem_opened_retrieval")
if opened:
    with st.container(border=True):
        st.markdown(f"**Retrieval opened from the Run page:** {md_text(opened.get('label', ''))}")
        st.caption("Exactly as the agent recorded it at that step (the trace keeps every candidate's scores, "
                   "so this works even when the store is gone). Move the weights to see how it would rank "
                   "with other weights.")
        if opened.get("missing_store"):
            st.caption(f"The run that recorded it kept its memory in a store ({md_code(opened['missing_store'])}) that is "
                       f"not on this machine, so the store shown below is another one: {why_default}.")
        result = parse_result(opened["result"])
        if result is not None:
            render_retrieval(result, key="mem_opened")
        if st.button("Close", key="mem_opened_close"):
            S.pop("mem_opened_retrieval", None)
            st.rerun()

try:  # a shared app opens and creates stores only under its own folders; nothing outside is read
    share.checked_path(store_dir, what="memory stores")
except share.PathRefused as e:
    st.error(str(e))
    traces_only()
if not is_store(store_dir):
    st.warning(f"There is no memory store at {md_text(repr(store_dir))} (no chroma.sqlite3 there), so nothing was "
               f"opened or created. Enter the directory of a store, for example {md_text(repr(default_dir))}.")
    refusal = None
    try:
        share.checked_path(store_dir, what="memory stores", create=True)
    except share.PathRefused as e:
        refusal = str(e)
    if not share.unlocked():
        refusal = "In a shared class only the teacher (with the passcode) creates memory stores."
    # checked again here, not only by `disabled`: a crafted message can press a disabled button
    if st.button("Create a small demo store there", key="mem_seed_new", disabled=refusal is not None,
                 help=refusal or "Writes a hand-written demo of ScienceWorld memories into a new store at this path.") \
            and refusal is None:
        with st.spinner("Embedding the demo memories..."):
            seed_demo(open_store(store_dir))
        st.rerun()
    if refusal:
        st.caption(refusal)
    traces_only()
try:
    stream = open_store(store_dir)
except Exception as e:  # a broken store must leave the rest of the app usable
    st.error(f"Cannot open the memory store at {md_text(repr(store_dir))}: {type(e).__name__}: {md_text(e)}")
    st.stop()

frame = memory_frame(stream)
counts = frame["type"].value_counts() if len(frame) else pd.Series(dtype=int)
m1, m2, m3, m4, m5 = st.columns([1, 1, 1, 1, 1.3])
m1.metric("Memories", len(frame), help="Everything stored in this memory stream.")
m2.metric("Observations", int(counts.get("observation", 0)), help="What the agent saw and did.")
m3.metric("Plans", int(counts.get("plan", 0)), help="Sage's plans (Q1-Q5 answers and action buffers).")
m4.metric("Reflections", int(counts.get("reflection", 0)), help="Conclusions drawn from other memories.")
with m5:
    if st.button("Reload from disk", key="mem_reload", help="Read the store again (another process may write it)."):
        if stream.refresh(force=True):
            st.rerun()
        st.caption("The agent is in the middle of a step on this store: reload once its step is recorded.")

if len(frame) == 0:
    st.info(f"The memory store at {md_text(stream.path)} is empty. Run the agent with AMM on to fill it, or seed a small "
            "demo store of ScienceWorld memories (boiling water, growing a plant, testing conductivity).")
    if st.button("Seed demo store", key="mem_seed", type="primary", disabled=not share.unlocked()) \
            and share.unlocked():
        with st.spinner("Embedding the demo memories..."):
            seed_demo(stream)
        st.rerun()
    traces_only()

tabs = st.tabs(["Memories", "Query", "From a trace", "Recency & importance", "Reflection tree", "Embedding map"])
with tabs[0]:
    panel_table(stream, frame)
with tabs[1]:
    panel_query(stream, frame)
with tabs[2]:
    panel_trace()
with tabs[3]:
    panel_recency_importance(stream, frame)
with tabs[4]:
    panel_tree(stream)
with tabs[5]:
    panel_projection(stream, frame)
