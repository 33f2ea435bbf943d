"""Follow live: a read-only view of an episode while it is being written, for a class watching the teacher's run.

The trace on disk is the source: a follower reads it and never touches the agent, so any number of browsers can
follow. One `TraceTail` per trace serves every session of the server (thirty followers cost one read of each new
line). One watcher thread per server (`Pusher`) looks at the followed traces every PUSH_EVERY_S seconds and asks each
follower at live to redraw as soon as a step lands, through Streamlit's runtime, the way a browser asks for a rerun;
browsers also poll in a small fragment, rarely (every POLL_WITH_PUSH_S seconds), or every POLL_S seconds where the
server cannot push. `?follow=live` follows the newest run in the runs folder (the class link: when the teacher starts
another episode, followers move to it), `?follow=PATH` one episode. A follower can scrub back and jump back to live;
one that joins late sees the whole episode so far.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import streamlit as st

from agent_core.trace import Episode, TraceError, TraceTail
from views import sources

log = logging.getLogger("swiftsage.follow")

S = st.session_state
LIVE = "live"
PUSH_EVERY_S = 0.15  # how often the server's one watcher looks at the followed traces (a stat each)
# a follower is asked again only once it has drawn what it was last asked for (it registers at the end of every
# draw), and not sooner than this after its last draw: a fast run (Swift alone, a step every 0.3 s) is shown a few
# steps at a time instead of interrupting every draw with the next step
PUSH_MIN_GAP_S = 0.5
PUSH_RETRY_S = 10.0  # a follower that never drew what it was asked for (a lost request) is asked again after this
# how often a follower's browser asks on its own whether a step was added: the fallback when the server cannot push
# (a poll costs the server ~3 ms; thirty followers polling every 0.75 s cost a llama.cpp call ~20% of its speed)
POLL_S = float(os.environ.get("SWIFTSAGE_FOLLOW_POLL_S") or 0.75)
POLL_WITH_PUSH_S = float(os.environ.get("SWIFTSAGE_FOLLOW_POLL_S") or 5.0)

_newest: dict = {"at": 0.0, "path": None, "dir": None}
_newest_lock = threading.Lock()


# one tail per followed trace for the whole server; followers can name only traces under runs/ (`followable`), and a
# class follows one or a few, so 256 keeps every followed run's tail however many students arrive
@st.cache_resource(show_spinner=False, max_entries=256)
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
                    if p.is_symlink():  # a link in runs/ may point anywhere: only the runs' own files are followed
                        continue
                    t = p.stat().st_mtime
                except OSError:
                    continue
                if t > best_t:
                    best, best_t = p, t
        except OSError:
            best = None
        _newest.update(at=now, path=best, dir=runs)
        return best


def followable(target: str) -> Path | None:
    """A trace a follower may name: one under the runs folder (where runs are written), never through a link. The
    shipped examples and evaluations are finished, so they open as recorded episodes; this keeps the distinct
    targets a class can make the server watch to the runs actually there."""
    p = sources.resolve_trace(target)
    if p is None or p.is_symlink() or not sources.inside(p, sources.runs_dir()):
        return None
    return p


def target_path(target: str, max_age_s: float = 0.5) -> Path | None:
    """The trace a follow target names: the newest run for 'live', else a trace under the runs folder."""
    return newest_run(max_age_s) if target == LIVE else followable(target)


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
    if raw != LIVE and followable(raw) is None:
        recorded = sources.resolve_trace(raw)
        if recorded is not None:  # a finished episode (an example, an evaluation): it opens as a recording
            S["run_source"], S["run_open_trace"], S["run_trace"] = "Recorded episode", str(recorded), str(recorded)
            return
        S["run_link_error"] = (f"The link asks to follow `{raw}`, which is not a run this app can follow (only "
                               f"`live` or a trace under runs/).")
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


class Pusher:
    """One watcher per server: when a followed trace gains a step, each follower at live is asked to redraw at once,
    through Streamlit's runtime (the rerun a browser would ask for), so followers cost nothing while the teacher's
    agent thinks, and a new step shows as soon as it is written. Followers register on every draw of the follow view;
    one that left the page, scrubbed back or closed its browser is dropped."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.followers: dict[str, dict] = {}
        self.thread: threading.Thread | None = None

    def register(self, session_id: str, page_hash: str, target: str, shown: str | None, n: int, at_live: bool) -> None:
        with self.lock:
            self.followers[session_id] = {"page": page_hash, "target": target, "shown": shown, "n": n,
                                          "at_live": at_live, "pushed": 0.0, "drawn": time.monotonic()}
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="follow-pusher", daemon=True)
                self.thread.start()

    def unregister(self, session_id: str) -> None:
        with self.lock:
            self.followers.pop(session_id, None)

    def _loop(self) -> None:
        while True:
            time.sleep(PUSH_EVERY_S)
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - the watcher must outlive one bad read; browsers still poll
                log.exception("follow watcher")

    def _tick(self) -> None:
        with self.lock:
            items = [(sid, dict(f)) for sid, f in self.followers.items() if f["at_live"]]
        state: dict[str, tuple[str | None, int]] = {}
        now = time.monotonic()
        for sid, f in items:
            if f["target"] not in state:
                path = target_path(f["target"], max_age_s=PUSH_EVERY_S)
                try:
                    state[f["target"]] = (str(path), len(read(path).steps)) if path else (None, -1)
                except (OSError, TraceError):
                    state[f["target"]] = (str(path), f["n"])
            shown, n = state[f["target"]]
            if (shown, n) == (f["shown"], f["n"]) or now - f["drawn"] < PUSH_MIN_GAP_S:
                continue
            if f["pushed"] and now - f["pushed"] < PUSH_RETRY_S:
                continue  # still drawing what it was asked for last time
            if self._push(sid, f["page"]):
                with self.lock:
                    if sid in self.followers:
                        self.followers[sid]["pushed"] = now
            else:
                self.unregister(sid)

    @staticmethod
    def _push(session_id: str, page_hash: str) -> bool:
        """Ask one session for a rerun of the page it shows; False when it is gone or has moved to another page."""
        from streamlit.proto.ClientState_pb2 import ClientState
        from streamlit.runtime import Runtime

        rt = Runtime.instance()
        info = rt._session_mgr.get_active_session_info(session_id)  # noqa: SLF001 - pinned Streamlit (1.67)
        if info is None:
            return False
        current = info.session._client_state  # noqa: SLF001
        if current.page_script_hash and current.page_script_hash != page_hash:
            return False
        # no widget states: the session keeps the values it has (as after a rerun a browser asked for)
        cs = ClientState(query_string=current.query_string, page_script_hash=page_hash)
        rt._get_async_objs().eventloop.call_soon_threadsafe(info.session.request_rerun, cs)  # noqa: SLF001
        return True


@st.cache_resource(show_spinner=False)
def pusher() -> Pusher | None:
    """The server's watcher, or None where Streamlit's runtime is not a server (AppTest): browsers then poll."""
    try:
        from streamlit.runtime import Runtime

        rt = Runtime.instance()
        rt._session_mgr.get_active_session_info  # noqa: B018, SLF001 - the parts the watcher uses exist
        rt._get_async_objs().eventloop  # noqa: B018, SLF001
    except Exception:  # noqa: BLE001 - another Streamlit, or no server
        return None
    return Pusher()


def register(target: str, shown: str | None, n: int) -> float:
    """This session follows `target` and shows `n` steps of `shown`; returns how often its browser should still
    poll (rarely when the server pushes)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    p, ctx = pusher(), get_script_run_ctx()
    if p is None or ctx is None:
        return POLL_S
    p.register(ctx.session_id, ctx.page_script_hash, target, shown, n, bool(S.get("follow_at_live", True)))
    return POLL_WITH_PUSH_S


def unregister() -> None:
    """This session no longer follows (it switched to a live run or a recorded episode)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    p, ctx = pusher(), get_script_run_ctx()
    if p is not None and ctx is not None:
        p.unregister(ctx.session_id)


def watch(target: str, shown: str | None, n: int) -> None:
    """Register with the server's watcher, and poll from the browser as well (rarely when the server pushes)."""
    every = register(target, shown, n)
    (_watch_push if every == POLL_WITH_PUSH_S else _watch_poll)(target, shown, n)


@st.fragment(run_every=POLL_WITH_PUSH_S)
def _watch_push(target: str, shown: str | None, n: int) -> None:
    _check(target, shown, n)


@st.fragment(run_every=POLL_S)
def _watch_poll(target: str, shown: str | None, n: int) -> None:
    _check(target, shown, n)


def _check(target: str, shown: str | None, n: int) -> None:
    """A poll from the browser: redraw the whole page when the followed trace gained a step (or, following 'live',
    when a newer run started); a follower that scrubbed back only hears how many steps are new."""
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
