"""A live run in one browser session: Reset, Step, Run N / Run to end and Pause. Each step runs in a worker
thread, so the page can count the seconds while a model thinks."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import streamlit as st

from agent_core.env import catalog
from session.agent_factory import build_config, factory, settings_key
from views import next_hint as records_next_hint, pending_actions, share
from views.common import actor_label
from views.progress import call_label, call_purpose, progress_label
from views.run_sidebar import LiveSettings

if TYPE_CHECKING:
    from session.continue_run import ContinueRequest

log = logging.getLogger("swiftsage.run_page")
S = st.session_state
KEY = "run_session"


@dataclass
class StepJob:
    """One `agent.step()` in flight. Its worker thread has no Streamlit session, so it writes only here; the page
    reads the job to show the seconds and books the step exactly once."""

    step: int
    label: str
    started: float
    since: float  # when the current part (the step, or its latest model call) began
    call: int = 0  # model calls so far in this step
    purpose: str = ""  # the current model call's purpose ("" before the first)
    done: bool = False
    rec: Any = None  # the StepRecord, once the step has run
    error: str | None = None
    over: bool = False  # the episode had ended before this step could run
    booked: bool = False
    cancel: threading.Event = field(default_factory=threading.Event)

    def progress(self) -> dict[str, Any]:
        return {"step": self.step, "label": self.label, "started": self.started, "since": self.since,
                "call": self.call, "purpose": self.purpose}


def _kept_under(key: str, doc: str) -> property:
    return property(lambda self: S.get(key), lambda self, value: S.__setitem__(key, value), doc=doc)


@dataclass
class RunSession:
    """This browser session's live run, under one session key. The agent, its episode's header and whether a run
    is going on stay under their own keys (`run_agent`, `run_header`, `run_running`): tests and benchmarks read
    them there."""

    agent_key: tuple | None = None  # settings_key() of the settings the agent was built with
    error: str | None = None
    cmd: str | None = None  # the button pressed, taken by the next script run
    left: int | None = None  # steps left of "Run N"; None: run to the end
    job: StepJob | None = None
    paused_call: bool = False  # Pause stopped a model call in flight: say so once
    request: ContinueRequest | None = None  # a fork or resume, taken before the sidebar is drawn
    # Streamlit starts a new script run as soon as the user clicks anything, even while an older one is still
    # inside a slow step: this lock keeps the two from driving the agent at once
    lock: threading.Lock = field(default_factory=threading.Lock)

    agent = _kept_under("run_agent", "The session's Agent (None before the first Reset).")
    header = _kept_under("run_header", "The EpisodeHeader of the episode being played (None: no episode).")
    running = _kept_under("run_running", "Run N / Run to end is stepping.")


def session() -> RunSession:
    rs = S.get(KEY)
    if rs is None:
        rs = S[KEY] = RunSession()
    return rs


def set_cmd(name: str) -> None:
    """A run button's on_click: the command for the next script run."""
    rs = session()
    rs.cmd = name
    if name in ("reset", "step", "pause"):
        rs.running = False
    job = rs.job
    if name == "pause" and job is not None and not job.done:
        job.cancel.set()  # a model call in flight stops now; its step falls back to Swift and is recorded
        rs.paused_call = True
    elif name == "run_n":
        rs.running, rs.left = True, int(S.get("run_n_steps", 5))
    elif name == "run_end":
        rs.running, rs.left = True, None


def fail(msg: str) -> None:
    rs = session()
    rs.error, rs.running = msg, False


def pop_paused_call() -> bool:
    rs = session()
    paused, rs.paused_call = rs.paused_call, False
    return paused


def wait_for_step_in_flight() -> None:
    """A click starts a new run of the page while a step may still be running in its worker: show it with its
    seconds, and book it when it ends."""
    rs = session()
    if rs.job is not None and rs.agent is not None and not rs.job.booked:
        _watch(rs.job, rs.agent, st)
        return
    if rs.lock.locked():
        with st.status("A step is still running (probably a slow model call); the page updates when it "
                       "finishes...") as status:
            while not rs.lock.acquire(timeout=0.5):
                pass
            rs.lock.release()
            status.update(label="The step in progress has finished.", state="complete")


def drop_agent(rs: RunSession) -> None:
    """Close this session's agent (its JVM goes with it); call with the session's lock held."""
    if rs.agent is not None:
        try:
            rs.agent.close()
        except Exception:  # noqa: BLE001 - the old agent is going away anyway
            log.exception("closing the previous agent")
    rs.agent = rs.header = None


def do_reset(s: LiveSettings) -> None:
    if not share.unlocked():
        return fail("This shared app is locked: only the teacher (with the passcode) starts runs.")
    try:
        catalog().check_variation(s.task, int(s.variation), s.split)
        if s.backend == "openai" and not s.base_url.strip():
            raise ValueError("enter the URL of the OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1)")
        cfg = build_config(s)
    except ValueError as e:
        return fail(f"Cannot start: {e}")
    rs, key = session(), settings_key(s)
    try:
        with rs.lock:
            agent = rs.agent
            if agent is None or rs.agent_key != key:
                drop_agent(rs)
                with st.status("Loading the agent (Swift model, LLM backend)...") as status:
                    agent = factory()(cfg)
                    rs.agent, rs.agent_key = agent, key
                    status.update(label="Agent ready", state="complete")
            with st.status(f"Starting ScienceWorld: {s.task}, variation {s.variation} ({s.split})...") as status:
                rs.header = None
                rs.header = agent.start(s.task, int(s.variation), s.split)
                rs.error = None
                status.update(label=f"Episode started: {s.task} variation {s.variation}", state="complete")
    except Exception as e:  # noqa: BLE001 - a JVM / model failure must show up, not crash the page
        log.exception("reset failed")
        fail(f"Reset failed: {type(e).__name__}: {e}")


def command(s: LiveSettings) -> bool:
    """Carry out the button pressed since the last run; True when a step should be taken in this run."""
    rs = session()
    cmd, rs.cmd = rs.cmd, None
    if cmd == "reset":
        do_reset(s)
    want_step = cmd == "step" or (cmd != "reset" and bool(rs.running))
    if want_step and (rs.agent is None or rs.header is None):
        fail("No episode yet: choose a task and press **Reset**.")
        return False
    return want_step


def _after_step(rs: RunSession, agent) -> None:
    """Bookkeeping of a finished step (no Streamlit calls: it must not be interrupted)."""
    rs.error = None
    if rs.running and rs.left is not None:
        rs.left -= 1
        if rs.left <= 0:
            rs.running = False
    if agent.done:
        rs.running = False


def _start_step(rs: RunSession, agent) -> StepJob:
    """Run one `agent.step()` in a worker thread."""
    pending = pending_actions(agent.records)  # from the last record, not the agent's state
    owner = "The Critic's actions" if pending and pending[0][1] == "critic" else "Sage's plan"
    now = time.perf_counter()
    job = StepJob(step=len(agent.records) + 1, started=now, since=now,
                  label=(f"{owner}: taking the next buffered action ({len(pending)} pending)" if pending else
                         "Swift is choosing (if a switching rule fires, Sage is called: an LLM call)"
                         if getattr(getattr(agent, "parts", None), "sage", True) else
                         "Swift is choosing (Swift alone: no model call)"))
    llm, lock = getattr(agent, "llm", None), rs.lock  # the worker cannot read the session state

    def announce(prompt: str = "") -> None:
        job.label, job.purpose, job.since, job.call = (call_label(prompt), call_purpose(prompt), time.perf_counter(),
                                                       job.call + 1)

    def work() -> None:
        try:
            with lock:
                try:
                    if agent.done:  # another run finished the episode while this one waited
                        job.over = True
                        return
                    if hasattr(llm, "on_call"):
                        llm.on_call, llm.cancel = announce, job.cancel
                    job.rec = agent.step()
                finally:
                    if hasattr(llm, "on_call"):
                        llm.on_call = llm.cancel = None
        except Exception as e:  # noqa: BLE001 - show it, stop running, keep the page alive
            log.exception("step failed")
            job.error = f"Step failed: {type(e).__name__}: {e}"
        finally:
            job.done = True  # after the lock is free: a page that sees the job done finds the agent free

    threading.Thread(target=work, name="agent-step", daemon=True).start()
    return job


def _finish_step(job: StepJob, agent) -> None:
    """The bookkeeping of a finished step, exactly once (also when the run that started it was interrupted by a
    click and a later run picks it up)."""
    if job.booked:
        return
    job.booked = True
    rs = session()
    if job.over:
        rs.running = False
    elif job.error and job.cancel.is_set():  # Pause stopped it: a pause, not a failure
        rs.running = False
    elif job.error:
        fail(job.error)
    elif job.rec is not None:
        _after_step(rs, agent)


def _watch(job: StepJob, agent, where) -> None:
    """Show the step in flight with its elapsed seconds until it ends; the last step stays readable below."""
    def label() -> str:
        if job.cancel.is_set():  # said at once: a model call can take a few seconds to stop
            return f"Stopping step {job.step}... (Pause pressed: the model call in progress is being stopped)"
        return progress_label(job.progress(), agent.records)

    with where.status(label(), expanded=False) as status:
        while not job.done:
            status.update(label=label())
            time.sleep(0.25 if job.cancel.is_set() else 0.5)
        _finish_step(job, agent)
        rec = job.rec
        if job.cancel.is_set():
            cut = rec is None or any("cancel" in (c.error or "") for c in rec.llm_calls)
            what = (f"Paused after step {job.step} ('{rec.action}', {actor_label(rec.system)})" if not cut and rec
                    else f"Paused: the model call of step {job.step} was stopped" + (
                        f"; the step took '{rec.action}' ({actor_label(rec.system)})" if rec is not None else ""))
            status.update(label=what + ". Press Step or Run to go on.", state="complete")
        elif job.error:
            status.update(label=job.error, state="error")
        elif rec is not None:
            status.update(label=f"Step {rec.step}: {actor_label(rec.system)} took '{rec.action}' "
                                f"({rec.timings.get('total', 0):.1f} s)", state="complete")
        else:
            status.update(label="The episode is over: press Reset to start another.", state="complete")


# How long a click waits for its step before drawing anything: a Swift step (~0.2 s) is drawn once, already
# taken, instead of drawing the old step, then the new one after a rerun; a slower step (Sage, a model call)
# draws the last step at once and shows its progress above it.
QUICK_STEP_S = 0.8


def begin_step() -> StepJob | None:
    """Start one step in its worker and wait up to QUICK_STEP_S for it; None when no step can be taken (the
    reason is shown). A step that finished in that time is booked already."""
    rs = session()
    agent, header = rs.agent, rs.header
    if agent is None or header is None:
        fail("No episode yet: choose a task and press **Reset**.")
        return None
    if not share.unlocked():
        fail("This shared app is locked: only the teacher (with the passcode) runs steps.")
        return None
    if agent.done:
        rs.running = False
        st.toast("The episode is over: press Reset to start another.")
        return None
    job = rs.job = _start_step(rs, agent)
    deadline = time.perf_counter() + QUICK_STEP_S
    while not job.done and time.perf_counter() < deadline:
        time.sleep(0.01)
    if job.done:
        _finish_step(job, agent)
    return job


def watch_step(job: StepJob, where) -> bool:
    """Show a step that is still running (in `where`) until it ends; True when the page should redraw with it."""
    rs = session()
    if rs.agent is None:
        return False
    _watch(job, rs.agent, where)
    return True


def next_hint(agent) -> str | None:
    """Who acts next, read from the agent's last step record (mode_after, buffer_after)."""
    if agent is None:
        return None
    return records_next_hint(list(agent.records), agent.done)
