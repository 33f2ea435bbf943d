"""Follow live: a read-only view of an episode while it is being written, for a class watching the teacher's run.

The trace on disk is the source: a follower reads it and never touches the agent, so any number of browsers can
follow. One `TraceTail` per trace serves every session of the server (thirty followers cost one read of each new
line); each browser checks the trace in a small fragment every POLL_S seconds and redraws the page only when a step was
added. `?follow=live` follows the newest run in the runs folder (the class link: when the teacher starts another
episode, followers move to it), `?follow=PATH` one episode. A follower can scrub back and jump back to live; one
that joins late sees the whole episode so far.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import streamlit as st

from agent_core.trace import Episode, TraceError, TraceTail
from views import sources

S = st.session_state
POLL_S = 0.75  # how often a follower's browser asks whether a step was added (a poll costs the server ~3 ms)
LIVE = "live"

_newest: dict = {"at": 0.0, "path": None, "dir": None}
_newest_lock = threading.Lock()


@st.cache_resource(show_spinner=False, max_entries=64)
def _tail(path: str) -> TraceTail:
    return TraceTail(path)


def newest_run(max_age_s: float = 0.5) -> Path | None:
    """The newest trace directly in the runs folder (the run being written), looked up at most every half second
    for the whole server, so thirty followers polling cost one directory listing."""
    runs = sources.runs_dir()
    now = time.monotonic()
    with _newest_lock:
        if now - _newest["at"] < max_age_s and _newest["dir"] == runs:
            return _newest["path"]
        best, best_t = None, -1.0
        try:
            for p in runs.glob("*.jsonl"):
                try:
                    t = p.stat().st_mtime
                except OSError:
                    continue
                if t > best_t:
                    best, best_t = p, t
        except OSError:
            best = None
        _newest.update(at=now, path=best, dir=runs)
        return best


def target_path(target: str) -> Path | None:
    """The trace a follow target names: the newest run for 'live', else a trace under the app's folders."""
    return newest_run() if target == LIVE else sources.resolve_trace(target)


def read(path: Path) -> Episode:
    return _tail(str(path)).poll()


def class_link(target: str = LIVE) -> str:
    """The link students open to follow (the teacher's own address; from another machine, its network address)."""
    try:
        base = (st.context.url or "").rstrip("/")
    except Exception:  # noqa: BLE001 - outside a server (AppTest)
        base = ""
    q = LIVE if target == LIVE else sources.link_path(target)
    return f"{base or 'http://<this machine>:8501'}/?follow={q}"


def open_from_link() -> None:
    """`?follow=live` or `?follow=PATH` switches the Run page to following, once per link."""
    raw = st.query_params.get("follow")
    if not raw or S.get("follow_link_seen") == raw:
        return
    S["follow_link_seen"] = raw
    if raw != LIVE and sources.resolve_trace(raw) is None:
        S["run_link_error"] = (f"The link asks to follow `{raw}`, which is not an episode this app can open (only "
                               f"traces under runs/, assets/episodes/ or evals/).")
        return
    S["run_source"], S["follow_target"], S["follow_at_live"] = "Follow live", raw, True


def _go_live() -> None:
    S["follow_at_live"] = True


def _moved(n: int, delta: int | None = None) -> None:
    """Prev / Next / the slider: a follower that steps away from the newest step stops following it."""
    if delta is not None:
        S["follow_step"] = min(n, max(0, int(S.get("follow_step", n)) + delta))
    S["follow_at_live"] = int(S.get("follow_step", n)) >= n


def sidebar(ep: Episode | None, target: str) -> int:
    """The follower's controls; returns the step to show."""
    st.caption("Following an episode as it is written: each new step appears by itself. Scrub back at any time; "
               "**Jump to live** comes back to the newest step. Nothing you do here changes the run.")
    if ep is None:
        return 0
    n = len(ep.steps)
    at_live = bool(S.get("follow_at_live", True))
    # written back every run (as the recorded view does): the slider's range grows with the run, and a widget whose
    # range changed would otherwise start again from 0
    S["follow_step"] = n if at_live else min(max(int(S.get("follow_step", n)), 0), n)
    st.caption(f"**{sources.trace_label(ep.path)}**")
    if n:
        st.slider("Step", 0, n, key="follow_step", on_change=_moved, args=(n,),
                  help="Scrub through the steps written so far; the newest is the live one.")
        c1, c2 = st.columns(2)
        c1.button("◀ Previous", key="follow_prev", width="stretch", shortcut="Left", on_click=_moved, args=(n, -1))
        c2.button("Next ▶", key="follow_next", width="stretch", shortcut="Right", on_click=_moved, args=(n, 1))
    st.button("⏭ Jump to live", key="follow_live", width="stretch", disabled=at_live, on_click=_go_live,
              type="primary" if not at_live else "secondary")
    if target == LIVE:
        st.caption("Following the newest run: when the teacher starts another episode, this view moves to it.")
    return int(S["follow_step"])


def status_line(ep: Episode, t: int) -> None:
    n = len(ep.steps)
    if ep.summary is not None:
        st.success(f"This episode has ended ({ep.summary.reason}, score {ep.summary.final_score:g}, {n} steps). "
                   f"Showing step {t}.", icon="🏁")
    elif S.get("follow_at_live", True):
        st.info(f"🔴 **Live**: showing the newest step ({n}); the next one appears as soon as it is written.")
    else:
        st.info(f"Scrubbed back to step {t} of {n}: **Jump to live** (sidebar) returns to the newest step.", icon="⏪")


@st.fragment(run_every=POLL_S)
def watch(target: str, shown: str | None, n: int) -> None:
    """Runs on its own every POLL_S seconds: redraw the whole page when the followed trace gained a step (or, following
    'live', when a newer run started); a follower that scrubbed back only hears how many steps are new."""
    path = target_path(target)
    if path is None:
        return
    if str(path) != shown:
        if S.get("follow_at_live", True) or shown is None:
            S["follow_at_live"] = True
            st.rerun(scope="app")
        st.caption("The teacher started another episode: **Jump to live** to follow it.")
        return
    try:
        now_n = len(read(path).steps)
    except (OSError, TraceError):
        return
    if now_n != n:
        if S.get("follow_at_live", True):
            st.rerun(scope="app")
        st.caption(f"{now_n - n} new step(s) since you scrubbed back.")


def episode_or_message(target: str) -> Episode | None:
    """The followed episode as written so far, or None with a message on the page."""
    path = target_path(target)
    if path is None:
        st.info("Nothing to follow yet: no run has been recorded in this app's runs folder. This page shows the "
                "teacher's run as soon as it starts.", icon="⏳")
        return None
    try:
        return read(path)
    except TraceError:
        st.info(f"The run `{path.name}` is starting...", icon="⏳")
    except OSError as e:
        st.error(f"Cannot read `{path.name}`: {e}")
    return None
