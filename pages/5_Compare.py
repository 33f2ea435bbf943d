"""Compare: two recorded episodes side by side (the same task under two presets, two runs, or a fork and
its parent): overlaid score trajectories, the steps aligned with the first difference marked, and what
each mechanism did in each. The choice lives in the URL (`?a=TRACE&b=TRACE`), so a link shows the same
comparison to anyone with the app."""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # AppTest.from_file runs this file on its own
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd  # noqa: E402
import streamlit as st  # noqa: E402

from agent_core.trace import TraceError, list_traces, read_episode  # noqa: E402
from views import sources  # noqa: E402
from views.common import md_code, md_text  # noqa: E402
from views.compare import align, mechanism_table, provenance_warning, score_overlay, step_story  # noqa: E402

S = st.session_state
st.title("Compare two episodes")
st.caption("What is this? Two recorded episodes next to each other: where their actions first differ, how their "
           "scores grew, and how often each mechanism (Sage, Gate-1, the Critic, memory) acted. Pick the same task "
           "and variation under two presets to see what a mechanism changes; a fork shows it from the same state. "
           "The link in your address bar opens this same comparison.")


@st.cache_data(show_spinner=False, max_entries=32)
def _load(path: str, mtime: float, size: int):
    return read_episode(path)


def _open(path: Path):
    stat = path.stat()
    return _load(str(path), stat.st_mtime, stat.st_size)


traces = [str(p) for p in list_traces(*sources.trace_roots())]
qp = st.query_params
picked: dict[str, str | None] = {}
for side in ("a", "b"):
    raw = qp.get(side)
    p = sources.resolve_trace(raw)
    if raw and p is None:
        st.error(f"Episode {side.upper()} in the link ({md_code(raw)}) is not a recorded episode this app can open (only "
                 f"traces under runs/, assets/episodes/ or evals/); choose one below.")
    if p is not None and str(p) not in traces:
        traces.insert(0, str(p))
    picked[side] = str(p) if p is not None else None
if not traces:
    st.info("No recorded episodes yet: run one on the Run page, or an evaluation (`python -m agent_core.evaluate`).")
    st.stop()

c1, c2 = st.columns(2)
for side, col in (("a", c1), ("b", c2)):
    key = f"cmp_{side}"
    if picked[side] and S.get(f"cmp_{side}_from_url") != picked[side]:
        S[key] = picked[side]  # the link wins once; later picks update the link
        S[f"cmp_{side}_from_url"] = picked[side]
    if S.get(key) not in traces:
        S[key] = traces[0] if side == "a" else traces[min(1, len(traces) - 1)]
    col.selectbox(f"Episode {side.upper()}", traces, key=key, format_func=sources.trace_label,
                  help="Recorded episodes: your runs, the shipped examples and evaluation traces.")
st.query_params.update({"a": sources.link_path(S["cmp_a"]), "b": sources.link_path(S["cmp_b"])})

eps = {}
for side in ("a", "b"):
    try:
        eps[side] = _open(Path(S[f"cmp_{side}"]))
    except (TraceError, OSError, ValueError) as e:
        st.error(f"Episode {side.upper()} cannot be read: {e}")
        st.stop()
a, b = eps["a"], eps["b"]


def _title(ep) -> str:
    h = ep.header
    pre = (h.config or {}).get("preset", "?") if isinstance(h.config, dict) else "?"
    end = (f"{ep.summary.reason}, final {ep.summary.final_score:g}" if ep.summary else "unfinished")
    return f"{h.task} v{h.variation} · {pre} · {len(ep.steps)} steps · {end}"


c1, c2 = st.columns(2)
c1.markdown(f"**A:** {md_text(_title(a))}")
c2.markdown(f"**B:** {md_text(_title(b))}")
if (a.header.task, a.header.variation) != (b.header.task, b.header.variation):
    st.warning(f"A and B play different episodes ({md_text(a.header.task)} v{md_text(a.header.variation)} vs "
               f"{md_text(b.header.task)} v{md_text(b.header.variation)}): their steps are aligned by number only.")
warn = provenance_warning(a, b)
if warn:
    st.warning(warn)
al = align(a, b)
if al.fork_step is not None:
    st.info(f"B is a fork of A: its first {al.fork_step} steps replay A's actions (checked against A's observations); "
            f"from step {al.fork_step + 1} on B's agent decides.")
if al.first_divergence is None:
    st.success("The two episodes took the same actions and saw the same observations at every step.")
else:
    st.markdown(f"**First difference at step {al.first_divergence}** (actions compared after normalisation).")

st.plotly_chart(score_overlay(a, b, al=al), width="stretch", key="cmp_scores")

focus_step = qp.get("step") or (str(al.first_divergence) if al.first_divergence else None)
if focus_step and focus_step.isdigit() and 1 <= int(focus_step) <= max(len(a.steps), len(b.steps)):
    k = int(focus_step)
    st.markdown(f"**At step {k}**: what each record says decided it")
    s1, s2 = st.columns(2)
    for col, ep, name in ((s1, a, "A"), (s2, b, "B")):
        with col:
            if k > len(ep.steps):
                st.caption(f"{name} had ended before step {k}.")
                continue
            st.markdown("\n".join(f"- {line}" for line in step_story(ep.steps[k - 1])))

# full width, with narrow columns for everything but the actions: A and B both fit without a sideways scroll
st.markdown("**Steps, aligned**")
df = pd.DataFrame(al.rows)


def _style(row):
    if al.first_divergence and row["step"] == al.first_divergence:
        return ["background-color: #ffd6d6; color: #1f2328"] * len(row)
    return ["" if row["same"] else "background-color: #fff3cd; color: #1f2328"] * len(row)


small = st.column_config.TextColumn(width="small")
st.dataframe(df.style.apply(_style, axis=1), hide_index=True, width="stretch", height=420,
             column_config={"step": st.column_config.NumberColumn(width=55), "same": st.column_config.CheckboxColumn(
                 "same", help="Same action and observation", width=55),
                 "A who": small, "B who": small, "A score": small, "B score": small,
                 # 280 px each: both actions fit beside each other in a laptop's main column (hover shows a long one)
                 "A action": st.column_config.TextColumn(width=280),
                 "B action": st.column_config.TextColumn(width=280)})
st.caption("Red: the first step where the two differ; yellow: every later step that differs.")
st.markdown("**What each mechanism did**")
st.dataframe(pd.DataFrame(mechanism_table(a, b)), hide_index=True, width="stretch",
             column_config={"": st.column_config.TextColumn(width="large")})

c1, c2 = st.columns(2)
for side, col, ep in (("a", c1, a), ("b", c2, b)):
    if col.button(f"Open {side.upper()} on the Run page", key=f"cmp_open_{side}"):
        S["run_source"], S["run_open_trace"], S["run_trace"] = "Recorded episode", str(ep.path), str(ep.path)
        try:
            st.switch_page("pages/0_Run.py", query_params={"trace": sources.link_path(ep.path)})
        except Exception:  # noqa: BLE001 - this page runs on its own (tests): say where to go
            st.info("Open the Run page: this episode is selected there.")
