"""Roads not taken, on the Run page: at the step shown, the action played and up to five alternatives rolled out
under the same continuation (agent_core.rollout), drawn as branches on the score chart with a sentence each.

The alternatives come from the step's record: what Swift alone would have played (where another system acted),
the actions Gate-1 dropped, Swift's next valid candidates, Sage's best-scored options. Rollouts already made (by
anyone, or shipped with an example in assets/episodes/rollouts/) are shown at once; new ones are played on demand
in a background thread, with progress and Cancel, by the operator only (a visitor of a shared app sees what is
there). A branch opens as a fork in Compare.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st

from agent_core.rollout import DEFAULT_HORIZON, Outcome, RolloutRequest, RolloutRunner, run_rollouts
from agent_core.trace.io import ROLLOUTS
from views import share, sources
from views.branches import PLAYED, branch_traces, branches_at, labelled, sentence
from views.common import md_text

S = st.session_state


@dataclass
class RoadsJob:
    """Rollouts in flight for one browser: progress, cancel, outcomes."""

    key: tuple
    requests: list[RolloutRequest]
    cancel: threading.Event = field(default_factory=threading.Event)
    done: int = 0
    outcomes: list[Outcome] | None = None
    error: str = ""
    thread: threading.Thread | None = None
    started: float = field(default_factory=time.monotonic)

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


@st.cache_resource(show_spinner=False)
def _head() -> str:
    from agent_core.provenance import code_revision

    return code_revision().get("commit", "")[:12]


@st.cache_resource(show_spinner=False)
def _runner() -> tuple[RolloutRunner, threading.Lock]:
    """One rollout runner per server (one JVM, Swift loaded once); browsers take turns on it."""
    return RolloutRunner(sources.runs_dir() / ROLLOUTS), threading.Lock()


def _start(job: RoadsJob) -> None:
    runner, lock = _runner()

    def work() -> None:
        try:
            with lock:
                if job.cancel.is_set():
                    return
                job.outcomes = run_rollouts(job.requests, out=runner.out, runner=runner, cancel=job.cancel,
                                            on_done=lambda n, _t, _o: setattr(job, "done", n))
        except Exception as e:  # noqa: BLE001 - a cancel, a dead JVM: said on the page, nothing kept half
            job.error = "cancelled" if job.cancel.is_set() else f"{type(e).__name__}: {e}"

    job.thread = threading.Thread(target=work, name="roads-not-taken", daemon=True)
    job.thread.start()


def render_roads(path: str, ep, t: int) -> list[tuple[str, Rollout]]:
    """The panel for step t (records[t - 1]); returns the branches to draw on the score chart."""
    st.markdown("**Roads not taken**")
    st.caption("What is this? From the state before this step, the action played and its alternatives are each "
               "played out in a copy of the game, with Swift alone playing on for "
               f"{DEFAULT_HORIZON} more steps (or to the step limit). The branches show what the choice changed. "
               "They are for looking back only: the agent never looks ahead like this when it plays.")
    if t < 1 or t > len(ep.steps):
        st.caption("Move to a step to see the roads not taken there.")
        return []
    rec = ep.steps[t - 1]
    if rec.replayed:
        st.caption("This step was replayed from the parent episode: open the parent to branch here.")
        return []
    if t > 1 and ep.steps[t - 2].done:
        return []
    k = t - 1
    rows = labelled(rec, branches_at(ep, k))
    job: RoadsJob | None = S.get("roads_job")
    key = (str(path), ep.header.run_id, k)
    missing = [(label, a) for label, a, r in rows if r is None]
    if job is not None and job.key == key and job.running:
        _progress(job)
    elif missing:
        if share.share_mode() and not share.unlocked():
            st.caption(f"{len(missing)} of these roads have not been played out yet; the teacher's app can do it.")
        elif st.button(f"Play out {len(missing)} road(s) from step {t - 1}", key="roads_run",
                       help="Each one: a fresh copy of the game replays the episode to here, plays the action, then "
                            f"Swift alone plays {DEFAULT_HORIZON} steps. About 3-5 s each on this CPU."):
            job = RoadsJob(key, [RolloutRequest(str(path), k, a, "swift", DEFAULT_HORIZON, label)
                                 for label, a in missing])
            S["roads_job"] = job
            _start(job)
            st.rerun()
    if job is not None and job.key == key and job.error and not job.running:
        st.warning(f"Rolling out stopped: {md_text(job.error)}")
    if job is not None and job.key == key and job.outcomes and not job.running:
        for o in job.outcomes:
            if o.rollout is None and o.error:
                st.warning(f"{md_text(o.request.label)} {md_text(o.request.action or '')}: {md_text(o.error)}")
    played = next((r for label, _a, r in rows if label.startswith(PLAYED)), None)
    drawn: list[tuple[str, Rollout]] = []
    for label, action, r in rows:
        if r is None:
            what = f"{md_text(label)} '{md_text(action)}'" if action else md_text(label)
            st.markdown(f"- {what}: not played out yet")
            continue
        drawn.append((label, r))
        where = "" if not r.commit or r.commit == _head() else f" (rolled out at {md_text(r.commit[:7])})"
        st.markdown(f"- {md_text(sentence(label, r, played, t))}{where}")
        try:
            st.page_link("pages/5_Compare.py", label="Compare this branch with the episode", icon="🔀",
                         query_params={"a": sources.link_path(path), "b": sources.link_path(r.path)})
        except Exception:  # noqa: BLE001 - the page runs on its own (tests): no navigation to link into
            st.caption(f"Compare: a={md_text(sources.link_path(path))} b={md_text(sources.link_path(r.path))}")
    return drawn


@st.fragment(run_every=1.0)
def _progress(job: RoadsJob) -> None:
    if not job.running:
        st.rerun()  # the whole page: the branches are drawn
    n = len(job.requests)
    st.progress(job.done / n if n else 1.0,
                text=f"Playing out road {min(job.done + 1, n)} of {n} ({time.monotonic() - job.started:.0f} s)")
    if st.button("Cancel", key="roads_cancel"):
        job.cancel.set()


__all__ = ["RoadsJob", "branch_traces", "render_roads"]
