"""The Run page's recorded episodes: pick a trace, scrub or play it step by step, follow the run being recorded,
and open one from a link. Everything is read back from trace files; no model is called."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Callable

import streamlit as st

from agent_core.trace import TraceError, has_summary, list_traces, read_episode
from views import follow, render_episode, roads, sources, tour
from views.common import WHAT, clip, md_code, md_text
from views.continue_boxes import fork_box, parent_line, resume_box
from views.episode_search import KINDS as SEARCH_KINDS, next_hit, search

S = st.session_state


@st.cache_data(show_spinner=False, max_entries=16)
def _load_episode(path: str, mtime: float, size: int):
    return read_episode(path, tolerant=True)  # corrupted lines are named, the readable steps still shown


@st.cache_data(show_spinner=False, max_entries=4)
def _episode_html(path: str, mtime: float, size: int) -> str:
    from views.branches import episode_branches
    from views.export import episode_html

    ep = read_episode(path, tolerant=True)
    return episode_html(ep, episode_branches(ep))


@st.cache_data(show_spinner=False, max_entries=2048)
def _finished(path: str, mtime: float, size: int) -> bool:
    return has_summary(path)


def _trace_label(p: str) -> str:
    """The run's name, and whether it finished: a trace without a summary was interrupted and can be resumed."""
    try:
        stat = os.stat(p)
        done = _finished(p, stat.st_mtime, stat.st_size)
    except OSError:  # gone since it was listed: no summary to find
        done = False
    return sources.trace_label(p) + ("" if done else " · unfinished (resumable)")


def first_visit() -> None:
    """A new session without a link opens on the tour's shipped example (not an empty live view)."""
    if "run_source" in S or st.query_params.get("trace"):
        return
    example = sources.examples_dir() / tour.EXAMPLE
    if not example.is_file():
        found = list_traces(sources.examples_dir())
        example = found[0] if found else None
    if example is not None:
        S["run_source"], S["run_open_trace"], S["run_trace"] = "Recorded episode", str(example), str(example)


def open_from_link() -> None:
    """`?trace=PATH[&step=N]` (from the Evaluate or Compare page, or a shared link) opens that recorded episode
    once; only traces under the app's trace folders are opened."""
    raw = st.query_params.get("trace")
    if not raw or S.get("run_link_seen") == (raw, st.query_params.get("step")):
        return
    S["run_link_seen"] = (raw, st.query_params.get("step"))
    p = sources.resolve_trace(raw)
    if p is None:
        S["run_link_error"] = (f"The link names {md_code(raw)}, which is not a recorded episode this app can open (only "
                               f"traces under runs/, assets/episodes/ or evals/).")
        return
    S["run_source"], S["run_open_trace"], S["run_trace"] = "Recorded episode", str(p), str(p)
    step = st.query_params.get("step")
    if step and re.fullmatch(r"[0-9]{1,6}", step):  # ASCII digits only: '²'.isdigit() is True, int('²') raises
        S["run_rec_loaded"], S["run_rec_step"] = str(p), int(step)
    elif step:
        S["run_link_error"] = (f"The link's step {md_code(clip(step, 20))} is not a step number; the episode opens "
                               f"at step 0.")


def _toggle_play(n: int) -> None:
    playing = not S.get("run_playing")
    if playing and int(S.get("run_rec_step", 0)) >= n:
        S["run_rec_step"] = 0  # played to the end: Play starts again from the start
    S["run_playing"] = playing


def _player(path: str, n: int) -> None:
    """Sidebar: the step slider, Previous / Next, Play / Pause and its speed."""
    if S.get("run_rec_loaded") != path:
        S["run_rec_loaded"] = path
        S["run_rec_step"], S["run_playing"] = 0, False
    if "run_play_next" in S:
        S["run_rec_step"] = S.pop("run_play_next")
    S["run_rec_step"] = min(max(int(S.get("run_rec_step", 0)), 0), n)
    if not n:
        st.caption("This episode has no steps yet.")
        return
    st.slider("Step", 0, n, key="run_rec_step",
              help="Scrub through the recorded steps; 0 is the start state. No model is called.")
    c1, c2 = st.columns(2)
    c1.button("◀ Previous", key="run_rec_prev", width="stretch", shortcut="Left",
              on_click=lambda: S.update(run_rec_step=max(0, S["run_rec_step"] - 1), run_playing=False))
    c2.button("Next ▶", key="run_rec_next", width="stretch", shortcut="Right",
              on_click=lambda: S.update(run_rec_step=min(n, S["run_rec_step"] + 1), run_playing=False))
    c3, c4 = st.columns([3, 2])
    if S.get("run_playing") and int(S["run_rec_step"]) >= n:
        S["run_playing"] = False  # played to the last step
    playing = bool(S.get("run_playing"))
    c3.button("⏸ Pause" if playing else "▶ Play", key="run_rec_play", width="stretch", shortcut="P",
              on_click=_toggle_play, args=(n,),
              help="Play the episode a step at a time, with its narration (keys: P plays / pauses, ← and → "
                   "step back and on).")
    S.setdefault("run_play_every", 2.0)
    c4.selectbox("Seconds per step", [1.0, 2.0, 4.0, 8.0], key="run_play_every", label_visibility="collapsed",
                 format_func=lambda x: f"{x:g} s / step", help="How long each step stays on screen while playing.")
    st.caption("Keys: ← previous · → next · P play / pause")


def _jump(hits: list[int], forward: bool) -> None:
    step = next_hit(hits, int(S.get("run_rec_step", 0)), forward)
    if step is not None:
        S.update(run_rec_step=step, run_playing=False)


def _search_box(records) -> list[int]:
    """Search this episode: text in the actions and observations, and kinds of decision; the hits are marked on
    the timeline (a star lane) and the buttons jump between them."""
    with st.expander("Search this episode", expanded=bool(S.get("run_search") or S.get("run_search_kinds"))):
        text = st.text_input("Text in an action or observation", key="run_search", placeholder="e.g. thermometer")
        kinds = st.multiselect("Kinds of decision", list(SEARCH_KINDS), key="run_search_kinds",
                               placeholder="e.g. Gate-1 drop, Critic")
        hits = search(records, text, kinds)
        if not (text.strip() or kinds):
            return []
        if not hits:
            st.caption("No step matches.")
            return []
        shown = ", ".join(str(h) for h in hits[:12]) + (f" and {len(hits) - 12} more" if len(hits) > 12 else "")
        st.caption(f"{len(hits)} step(s) match: {shown}. They are the stars on the timeline.")
        c1, c2 = st.columns(2)
        c1.button("◀ Previous hit", key="run_hit_prev", width="stretch", on_click=_jump, args=(hits, False))
        c2.button("Next hit ▶", key="run_hit_next", width="stretch", on_click=_jump, args=(hits, True))
    return hits


def recorded_view(on_fork: Callable[[str, int, str, bool], None], on_resume: Callable[[str, int], None]) -> None:
    runs, examples = sources.runs_dir(), sources.examples_dir()
    traces = [str(p) for p in list_traces(runs, examples)]
    opened = S.get("run_open_trace")  # from a link, the Evaluate page or the Compare page
    if opened and opened not in traces and Path(opened).exists():
        traces.insert(0, opened)
    with st.sidebar:
        if not traces:
            st.info(f"No recorded episodes yet in `{runs}` or `{examples}`. Every live "
                    f"run is recorded: run one first.")
            return
        if S.get("run_trace") not in traces:
            S["run_trace"] = traces[0]
        path = st.selectbox("Recorded episode", traces, key="run_trace", persist_state="session", format_func=_trace_label,
                            help="Traces in runs/ (your live runs) and assets/episodes/ (examples), newest first.")
    try:
        stat = Path(path).stat()
        ep = _load_episode(path, stat.st_mtime, stat.st_size)
    except TraceError as e:
        st.error(f"This trace cannot be read: {md_text(e)}. Choose another episode.")
        return
    except (OSError, ValueError) as e:
        st.error(f"Cannot open {md_text(path)}: {md_text(e)}")
        return
    if ep.problems:
        first = ep.problems[0]
        st.error(f"{len(ep.problems)} line(s) of this trace cannot be read, first {md_text(first)}"
                 + (f" (also lines {', '.join(str(p.line) for p in ep.problems[1:6])})" if len(ep.problems) > 1 else "")
                 + f". Showing the {len(ep.steps)} readable steps; the file is left as it is.")
    if ep.truncated_tail:
        line_no, _text = ep.truncated_tail
        st.warning(f"The last line ({line_no}) of this trace is half-written (the run crashed or is still being "
                   f"written); showing the {len(ep.steps)} complete steps before it.")
    n = len(ep.steps)
    with st.sidebar:
        _player(path, n)
        hits = _search_box(ep.steps)
        st.caption(WHAT["recorded"])
        t = int(S.get("run_rec_step", 0))
        # built when clicked, not on every draw (a 1,000-step episode's file takes seconds to write)
        st.download_button("Download as one HTML file",
                           data=lambda: _episode_html(path, stat.st_mtime, stat.st_size),
                           file_name=f"{Path(path).stem}.html", mime="text/html", key="run_export", width="stretch",
                           help="The whole episode in a single file that opens offline in any browser, no app "
                                "needed: step slider, narration, plan, buffer, Gate-1, retrievals with their score "
                                "bars, the score chart with the roads not taken rolled out so far.")
        fork_box(path, ep, t, on_fork)
        try:
            st.page_link("pages/6_Ask.py", label="Ask the agent about this episode", icon="💬",
                         query_params={"trace": sources.link_path(path)})
        except Exception:  # noqa: BLE001 - the page runs on its own (tests): no navigation to link into
            pass
        tour.show_again_button()
    tour.render_tour(ep.steps, t, example_open=Path(path).name == tour.EXAMPLE)
    resume_box(path, ep, on_resume)
    if ep.header.parent:
        parent_line(ep.header.parent, path)
    render_episode(ep.header, ep.steps, t, ep.summary, recorded=True, hits=tuple(hits),
                   roads=lambda: roads.branch_traces(roads.render_roads(path, ep, t)))
    if S.get("run_playing") and t < n:
        # the page is drawn; hold it, then show the next step (Pause or any click ends the wait)
        time.sleep(float(S.get("run_play_every", 2.0)))
        S["run_play_next"] = t + 1  # the slider is drawn already: its value changes on the next run
        st.rerun()


def follow_view() -> None:
    """Follow the run being recorded (the class link): read-only, from the trace on disk."""
    target = str(S.get("follow_target") or follow.LIVE)
    path = follow.target_path(target)
    ep = follow.episode_or_message(target)
    with st.sidebar:
        st.caption("Following: " + ("the newest run (the teacher's)" if target == follow.LIVE else
                                    md_code(sources.link_path(target))))
        t = follow.sidebar(ep, target)
    if ep is not None:
        follow.status_line(ep, t)
        render_episode(ep.header, ep.steps, t, ep.summary, recorded=True, lazy_steps=True)
    follow.watch(target, str(path) if path is not None else None, len(ep.steps) if ep is not None else -1)
