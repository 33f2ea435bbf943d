"""Run: watch the SwiftSage agent play ScienceWorld one step at a time, live or from a recorded trace.

This file is the page's layout, the live run's state and commands, and the sidebar. Both views render
from step records only (agent_core.trace) through the views/ package: a live run shows the records its
agent has written so far, a recorded episode shows the records read back from its JSONL file. The render
functions take (header, records, step) and never touch the agent, so replay is instant.

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
import sys
import threading
import time
import types
import weakref
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # AppTest.from_file("pages/0_Run.py") runs this file on its own
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import streamlit as st  # noqa: E402

from agent_core.config import PRESETS, Config, LLMConfig, SwiftConfig, apply_overrides, preset  # noqa: E402
from agent_core.env import SPLITS, catalog  # noqa: E402
from agent_core.llm.base import turn_text  # noqa: E402
from agent_core.llm.embedded import MODELS as EMBEDDED_MODELS  # noqa: E402
from agent_core.trace import TraceError, has_summary, list_traces, read_episode  # noqa: E402
from views import next_hint as records_next_hint, pending_actions, render_episode  # noqa: E402
from views import sources  # noqa: E402
from views.common import WHAT, actor_label  # noqa: E402
from views.llm import DEFAULT_EMBEDDED, llm_backend  # noqa: E402
from views.memory_panels import follow_open_request  # noqa: E402
from views.progress import call_label, call_purpose, progress_label  # noqa: E402
from views import follow, share, tour  # noqa: E402

log = logging.getLogger("swiftsage.run_page")

RUNS_DIR = sources.runs_dir()
EPISODES_DIR = sources.examples_dir()

# ----------------------------------------------------------------------------- the real agent

@st.cache_resource(show_spinner="Loading the Swift model (once per server)...")
def _swift_policy(swift_cfg_json: str):
    """The trained Swift model: read-only, shared by every browser session."""
    from agent_core.controller import load_swift

    cfg = Config(swift=SwiftConfig(**json.loads(swift_cfg_json)))
    return load_swift(cfg)


class _AnnouncingLLM:
    """Forwards every call to a shared backend and tells the page first, so a slow call says what it is."""

    def __init__(self, inner):
        self._inner = inner
        self.on_call = None  # set by the page around one step
        self.cancel = None  # the step's threading.Event: Pause sets it and the call in flight stops

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def chat(self, messages, **kwargs):
        if self.on_call is not None:
            self.on_call(turn_text(messages))
        if self.cancel is not None:
            kwargs.setdefault("cancel", self.cancel)
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
    llm = _AnnouncingLLM(llm_backend(cfg.llm))
    # reflection (AMM) runs between episodes in the background, so no step waits minutes for it
    agent = Agent(cfg, swift, llm, runs_dir=RUNS_DIR, reflect_in_background=True)
    weakref.finalize(agent, _close_env, agent.env)  # a session that goes away frees its JVM
    return agent


# ----------------------------------------------------------------------------- live run: state + commands

S = st.session_state


def _set_cmd(name: str) -> None:
    S["run_cmd"] = name
    if name in ("reset", "step", "pause"):
        S["run_running"] = False
    job = S.get("run_inflight")
    if name == "pause" and job is not None and not job["done"] and job.get("cancel") is not None:
        job["cancel"].set()  # a model call in flight stops now; its step falls back to Swift and is recorded
        S["run_paused_call"] = True
    elif name == "run_n":
        S["run_running"], S["run_left"] = True, int(S.get("run_n_steps", 5))
    elif name == "run_end":
        S["run_running"], S["run_left"] = True, None


def _settings_key(s: dict[str, Any]) -> tuple:
    factory = S.get("agent_factory")
    return (s["preset"], s["backend"], s["embedded_model"], s["base_url"], s["llm_model"], s["llm_timeout"],
            s["llm_threads"], s["step_limit"], s.get("memory_store", ""), s.get("quick", False),
            id(factory) if factory else None)


def _build_config(s: dict[str, Any]) -> Config:
    cfg = preset(s["preset"])
    cfg = apply_overrides(cfg, {"llm.backend": s["backend"], "llm.embedded_model": s["embedded_model"],
                                "llm.base_url": s["base_url"], "llm.model": s["llm_model"],
                                "llm.timeout_s": s["llm_timeout"], "llm.n_threads": s["llm_threads"],
                                "env.step_limit": s["step_limit"], "amm.store_dir": s.get("memory_store", "")})
    if share.share_mode():  # a shared app: the operator's LLM, whatever the session state holds
        cfg.llm = dataclasses.replace(share.operator().llm(), timeout_s=float(s["llm_timeout"]))
    if s.get("quick"):  # quick demo: no model call at all (Sage, the Critic, reflection between episodes)
        cfg = apply_overrides(cfg, {"controller.sage_enabled": False, "srm.critic_enabled": False,
                                    "amm.reflection": "off"})
    return cfg


def _fail(msg: str) -> None:
    S["run_error"] = msg
    S["run_running"] = False


def _lock() -> threading.Lock:
    """One lock per browser session around the agent: Streamlit starts a new script run as soon as the
    user clicks anything, even while an older run is still inside a slow step; the lock keeps the two
    from driving the agent at once."""
    return S.setdefault("run_lock", threading.Lock())


def wait_for_step_in_flight() -> None:
    """A click starts a new run of this script while a step may still be running in its worker: show it
    with its seconds, and book it when it ends."""
    job, agent = S.get("run_inflight"), S.get("run_agent")
    if job is not None and agent is not None and not job["booked"]:
        _watch(job, agent, st)
        return
    lock = _lock()
    if lock.locked():
        with st.status("A step is still running (probably a slow model call); the page updates when it "
                       "finishes...") as status:
            while not lock.acquire(timeout=0.5):
                pass
            lock.release()
            status.update(label="The step in progress has finished.", state="complete")


def _drop_agent() -> None:
    """Close this session's agent (its JVM goes with it); call with the session's lock held."""
    agent = S.get("run_agent")
    if agent is not None:
        try:
            agent.close()
        except Exception:  # noqa: BLE001 - the old agent is going away anyway
            log.exception("closing the previous agent")
    S["run_agent"] = S["run_header"] = None


def do_reset(s: dict[str, Any]) -> None:
    if not share.unlocked():
        return _fail("This shared app is locked: only the teacher (with the passcode) starts runs.")
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
                _drop_agent()
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


def _start_step(agent) -> dict[str, Any]:
    """Run one `agent.step()` in a worker thread, so the page can count the seconds while a model thinks. The
    worker never touches Streamlit; the page reads `job` (a plain dict) and does the bookkeeping itself."""
    pending = pending_actions(agent.records)  # from the last record, not the agent's state
    owner = "The Critic's actions" if pending and pending[0][1] == "critic" else "Sage's plan"
    now = time.perf_counter()
    job: dict[str, Any] = {
        "step": len(agent.records) + 1, "started": now, "since": now, "call": 0, "purpose": "",
        "label": (f"{owner}: taking the next buffered action ({len(pending)} pending)" if pending else
                  "Swift is choosing (if a switching rule fires, Sage is called: an LLM call)"),
        "done": False, "rec": None, "error": None, "over": False, "booked": False, "cancel": threading.Event()}
    llm = getattr(agent, "llm", None)

    def announce(prompt: str = "") -> None:
        job.update(label=call_label(prompt), purpose=call_purpose(prompt), since=time.perf_counter(),
                   call=job["call"] + 1)

    def work() -> None:
        with _lock():
            try:
                if agent.done:  # another run finished the episode while this one waited
                    job["over"] = True
                    return
                if hasattr(llm, "on_call"):
                    llm.on_call, llm.cancel = announce, job["cancel"]
                job["rec"] = agent.step()
            except Exception as e:  # noqa: BLE001 - show it, stop running, keep the page alive
                log.exception("step failed")
                job["error"] = f"Step failed: {type(e).__name__}: {e}"
            finally:
                if hasattr(llm, "on_call"):
                    llm.on_call = llm.cancel = None
                job["done"] = True

    threading.Thread(target=work, name="agent-step", daemon=True).start()
    return job


def _finish_step(job: dict[str, Any], agent) -> None:
    """The page's bookkeeping of a finished step, exactly once (also when the run that started it was
    interrupted by a click and a later run picks it up)."""
    if job["booked"]:
        return
    job["booked"] = True
    if job["over"]:
        S["run_running"] = False
    elif job["error"]:
        _fail(job["error"])
    elif job["rec"] is not None:
        _after_step(agent)


def _watch(job: dict[str, Any], agent, where) -> None:
    """Show the step in flight with its elapsed seconds until it ends; the last step stays readable below."""
    with where.status(progress_label(job, agent.records), expanded=False) as status:
        while not job["done"]:
            status.update(label=progress_label(job, agent.records))
            time.sleep(0.5)
        _finish_step(job, agent)
        rec = job["rec"]
        if job["error"]:
            status.update(label=job["error"], state="error")
        elif rec is not None:
            status.update(label=f"Step {rec.step}: {actor_label(rec.system)} took '{rec.action}' "
                                f"({rec.timings.get('total', 0):.1f} s)", state="complete")
        else:
            status.update(label="The episode is over: press Reset to start another.", state="complete")


def do_step(where) -> bool:
    """Take one step (shown in `where`); True when a step ran and the page should redraw with it."""
    agent, header = S.get("run_agent"), S.get("run_header")
    if agent is None or header is None:
        _fail("No episode yet: choose a task and press **Reset**.")
        return False
    if not share.unlocked():
        _fail("This shared app is locked: only the teacher (with the passcode) runs steps.")
        return False
    if agent.done:
        S["run_running"] = False
        st.toast("The episode is over: press Reset to start another.")
        return False
    job = _start_step(agent)
    S["run_inflight"] = job
    _watch(job, agent, where)
    return True


def next_hint(agent) -> str | None:
    """Who acts next, read from the agent's last step record (mode_after, buffer_after)."""
    if agent is None:
        return None
    return records_next_hint(list(agent.records), agent.done)


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
    memory_store = ""
    if preset(pre).amm.enabled:
        S.setdefault("run_memory", "continue")
        mem = st.radio("Episodic memory", ["continue", "fresh"], key="run_memory", horizontal=True,
                       format_func={"continue": "keep learning", "fresh": "fresh copy"}.get,
                       help="Keep learning: every episode writes into the agent's store (runs/memory/agent), so "
                            "what it learns carries over to your next episodes. Fresh copy: this browser session "
                            "starts from a new copy of the shipped warm store (or an empty one for weak memory), "
                            "so a demo is repeatable.")
        if mem == "fresh":
            S.setdefault("run_memory_session", time.strftime("%Y%m%d-%H%M%S"))
            memory_store = str(RUNS_DIR / "memory" / f"session-{S['run_memory_session']}-{pre}")
    quick = st.toggle("Quick demo: Swift alone", key="run_quick",
                      help="Swift acts alone and no model is called: no switching rule calls Sage, the Critic and "
                           "reflection are off (`controller.sage_enabled`, `srm.critic_enabled` = false, "
                           "`amm.reflection` = off), so every step takes a fraction of a second. The Sage and Critic "
                           "panels stay empty; Gate-1, the stagnation detector and memory still run in their presets. "
                           "Off: Sage is called when a rule fires, about 20 s per call with the embedded model.")
    if quick:
        st.caption("Quick demo: Swift acts alone; no model is called (Sage, Critic, reflection).")
    if share.share_mode():  # fixed by the operator: shown, not editable (the key goes only to their server)
        op = share.operator()
        st.caption(f"**LLM (Sage)**: {op.llm_label()} · CPU threads "
                   f"{op.n_threads or 'auto'} · fixed by whoever started this shared app.")
        backend, emb, base_url, model = op.backend, op.embedded_model, op.base_url, op.model
    else:
        backend, emb, base_url, model = llm_widgets()
    d_llm, d_env = LLMConfig(), Config().env
    S.setdefault("run_llm_timeout", int(d_llm.timeout_s))
    S.setdefault("run_llm_threads", d_llm.n_threads)
    S.setdefault("run_step_limit", d_env.step_limit)
    threads = S["run_llm_threads"]
    with st.expander("Advanced"):
        timeout = st.number_input("Sage call timeout (s)", min_value=5, max_value=1800,
                                  key="run_llm_timeout", help="A model call that takes longer is stopped and recorded "
                                  "as an error; the agent then falls back to Swift's action (`llm.timeout_s`).")
        if not share.share_mode():
            threads = st.number_input("LLM CPU threads (embedded; 0 = auto)", min_value=0, max_value=64,
                                      key="run_llm_threads", help="Threads llama.cpp uses (`llm.n_threads`). 0 "
                                      "chooses at every call: all cores when the others are idle, one fewer per busy "
                                      "core (a llama.cpp thread sharing its core with another program stalls the "
                                      "rest).")
        limit = st.number_input("Step limit", min_value=1, max_value=1000,
                                key="run_step_limit", help="The episode ends after this many steps "
                                "(`env.step_limit`, 100 in the paper's protocol).")
    return {"task": task, "split": split, "variation": variation, "preset": pre, "backend": backend,
            "embedded_model": emb, "base_url": base_url, "llm_model": model, "llm_timeout": float(timeout),
            "llm_threads": int(threads), "step_limit": int(limit), "memory_store": memory_store, "quick": bool(quick)}


def llm_widgets() -> tuple[str, str, str, str]:
    """The LLM choice (a local app only): backend, embedded model, server URL, model name."""
    op = share.operator_or_default()  # the operator's settings preselect the widgets
    S.setdefault("run_backend", op.backend)
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
                           help="Qwen2.5-Coder-1.5B plans coherently but takes ~20 s per Sage call (plan and "
                                "pick) on a 2-core CPU, ~4 s to review a focus; SmolLM2-135M answers in seconds but "
                                "its plans are poor.")
    else:
        S.setdefault("run_base_url", op.base_url)
        S.setdefault("run_llm_model", op.model)
        base_url = st.text_input("Server URL", key="run_base_url",
                                 help="The /v1 address of an OpenAI-compatible server, e.g. vLLM's.")
        model = st.text_input("Model name", key="run_llm_model",
                              help="The model name the server serves (empty: the server's default).")
    return backend, emb, base_url, model


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
              help="Stop running. A model call in progress is stopped at once: that step takes Swift's action "
                   "instead and is recorded with the cancellation.")
    if S.get("run_running"):
        left = S.get("run_left")
        st.caption(f"Running{'' if left is None else f': {left} step(s) left'}... press Pause to stop.")


# ----------------------------------------------------------------------------- recorded episodes

@st.cache_data(show_spinner=False, max_entries=16)
def _load_episode(path: str, mtime: float, size: int):
    return read_episode(path, tolerant=True)  # corrupted lines are named, the readable steps still shown


@st.cache_data(show_spinner=False, max_entries=4)
def _episode_html(path: str, mtime: float, size: int) -> str:
    from views.export import episode_html

    return episode_html(read_episode(path, tolerant=True))


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


def open_from_link() -> None:
    """`?trace=PATH[&step=N]` (from the Evaluate or Compare page, or a shared link) opens that recorded episode
    once; only traces under the app's trace folders are opened."""
    raw = st.query_params.get("trace")
    if not raw or S.get("run_link_seen") == (raw, st.query_params.get("step")):
        return
    S["run_link_seen"] = (raw, st.query_params.get("step"))
    p = sources.resolve_trace(raw)
    if p is None:
        S["run_link_error"] = (f"The link names `{raw}`, which is not a recorded episode this app can open (only "
                               f"traces under runs/, assets/episodes/ or evals/).")
        return
    S["run_source"], S["run_open_trace"], S["run_trace"] = "Recorded episode", str(p), str(p)
    step = st.query_params.get("step")
    if step and step.isdigit():
        S["run_rec_loaded"], S["run_rec_step"] = str(p), int(step)


def _fork_settings(header, pre: str, quick: bool) -> dict[str, Any]:
    """The live sidebar's settings for a fork: the recorded task, the chosen preset, this session's LLM."""
    d_llm = LLMConfig()
    return {"task": header.task, "split": header.split or "test", "variation": header.variation, "preset": pre,
            "backend": S.get("run_backend", "embedded"), "embedded_model": S.get("run_emb_model", DEFAULT_EMBEDDED),
            "base_url": S.get("run_base_url", d_llm.base_url), "llm_model": S.get("run_llm_model", ""),
            "llm_timeout": float(S.get("run_llm_timeout", d_llm.timeout_s)),
            "llm_threads": int(S.get("run_llm_threads", d_llm.n_threads)),
            "step_limit": int(S.get("run_step_limit", Config().env.step_limit)), "memory_store": "", "quick": quick}


def do_continue() -> None:
    """Fork (rerun from a recorded step under a chosen preset) or resume (continue an interrupted episode in its
    own trace): a new live agent replays the recorded actions in a fresh JVM, checking each observation
    against the record, then plays on on this page."""
    req = S.pop("run_fork_request", None) or S.pop("run_resume_request", None)
    if not req:
        return
    from agent_core.config import Config
    from agent_core.controller import ReplayError

    kind, path, t, pre, quick = req
    what = "fork" if kind == "fork" else "resume"
    if not share.unlocked():
        return _fail(f"Cannot {what}: this shared app is locked; only the teacher (with the passcode) starts runs.")
    try:
        ep = read_episode(path)
        if kind == "resume":  # the recorded configuration, with this session's LLM settings
            pre = ep.header.config.get("preset", "baseline")
            s = _fork_settings(ep.header, pre, quick)
            cfg = Config.from_dict(ep.header.config)
            cfg.llm = _build_config(s).llm
            t = len(ep.steps)
        else:
            s = _fork_settings(ep.header, pre, quick)
            cfg = _build_config(s)
        cfg.env.fresh_jvm = True
    except (TraceError, OSError, ValueError) as e:
        return _fail(f"Cannot {what}: {e}")
    try:
        with _lock():
            _drop_agent()
            with st.status(f"{'Forking' if kind == 'fork' else 'Resuming'} at step {t}: loading the agent, replaying "
                           f"{t} recorded actions in a fresh ScienceWorld and checking each observation...") as status:
                agent = (S.get("agent_factory") or _product_agent)(cfg)
                S["run_agent"] = agent
                S["run_header"] = agent.fork(ep, t) if kind == "fork" else agent.resume(ep)
                status.update(label=f"{t} steps replayed and checked; {pre} plays on from here", state="complete")
        for k, v in (("run_task", s["task"]), ("run_split", s["split"]), ("run_variation", s["variation"]),
                     ("run_preset", pre), ("run_quick", quick)):
            S[k] = v
        S["run_agent_key"] = _settings_key(s)
        S["run_error"] = None
    except ReplayError as e:
        _fail(f"Cannot {what}: {e}")
    except Exception as e:  # noqa: BLE001 - a JVM / model failure must show up, not crash the page
        log.exception("%s failed", what)
        _fail(f"{what.capitalize()} failed: {type(e).__name__}: {e}")


def resume_box(path: str, ep) -> None:
    """An interrupted trace (killed, stopped, or ended by an error) can be continued in place."""
    if not share.unlocked():
        return
    if ep.summary is not None and ep.summary.reason not in ("stopped", "error"):
        return
    if ep.steps and ep.steps[-1].done:
        return
    why = ("it has no summary: the run was killed or is still running elsewhere" if ep.summary is None else
           f"it was {ep.summary.reason}" + (f" ({ep.summary.error})" if ep.summary.error else ""))
    st.warning(f"This episode did not finish ({why}). **Resume** continues it in the same trace: a fresh "
               f"ScienceWorld replays its {len(ep.steps)} recorded actions, checks each observation, and the agent "
               f"goes on from step {len(ep.steps) + 1} (with this session's LLM settings).")
    st.button(f"Resume from step {len(ep.steps) + 1}", key="run_resume", width="stretch",
              on_click=lambda: S.update(run_resume_request=("resume", path, len(ep.steps), "", False),
                                        run_source="Live run", run_running=False))


def fork_box(path: str, ep, t: int) -> None:
    """Sidebar: rerun the recorded episode from the shown step with another preset."""
    if not share.unlocked():
        return
    n = len(ep.steps)
    ended = t > 0 and ep.steps[t - 1].done
    with st.expander("Rerun from this step (fork)", expanded=False):
        st.caption("Replays the recorded actions up to this step in a fresh ScienceWorld (each observation is "
                   "checked against the record), then lets the preset you choose play on as a new live run. "
                   "The Compare page then shows both.")
        if ended:
            st.caption(f"The episode ended at step {t}: pick an earlier step to fork.")
            return
        parent_preset = (ep.header.config or {}).get("preset", "baseline")
        names_p = list(PRESETS)
        S.setdefault("run_fork_preset", "srm" if parent_preset != "srm" else "full")
        pre = st.selectbox("Preset for the fork", names_p, key="run_fork_preset")
        quick = st.toggle("Quick demo: Swift alone (no model calls)", key="run_fork_quick")
        st.button(f"Fork at step {t} of {n}", key="run_fork", width="stretch",
                  on_click=lambda: S.update(  # the widgets' values at the click, not at the last draw
                      run_fork_request=("fork", path, t, S.get("run_fork_preset", pre), bool(S.get("run_fork_quick"))),
                      run_source="Live run", run_running=False))


def recorded_view() -> None:
    traces = [str(p) for p in list_traces(RUNS_DIR, EPISODES_DIR)]
    opened = S.get("run_open_trace")  # from a link, the Evaluate page or the Compare page
    if opened and opened not in traces and Path(opened).exists():
        traces.insert(0, opened)
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
    if ep.problems:
        first = ep.problems[0]
        st.error(f"{len(ep.problems)} line(s) of this trace cannot be read, first {first}"
                 + (f" (also lines {', '.join(str(p.line) for p in ep.problems[1:6])})" if len(ep.problems) > 1 else "")
                 + f". Showing the {len(ep.steps)} readable steps; the file is left as it is.")
    if ep.truncated_tail:
        line_no, text = ep.truncated_tail
        st.warning(f"The last line ({line_no}) of this trace is half-written (the run crashed or is still being "
                   f"written); showing the {len(ep.steps)} complete steps before it.")
    n = len(ep.steps)
    with st.sidebar:
        if S.get("run_rec_loaded") != path:
            S["run_rec_loaded"] = path
            S["run_rec_step"], S["run_playing"] = 0, False
        if "run_play_next" in S:
            S["run_rec_step"] = S.pop("run_play_next")
        S["run_rec_step"] = min(max(int(S.get("run_rec_step", 0)), 0), n)
        if n:
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
        else:
            st.caption("This episode has no steps yet.")
        st.caption(WHAT["recorded"])
        t = int(S.get("run_rec_step", 0))
        st.download_button("Download as one HTML file", data=_episode_html(path, stat.st_mtime, stat.st_size),
                           file_name=f"{Path(path).stem}.html", mime="text/html", key="run_export", width="stretch",
                           help="The whole episode in a single file that opens offline in any browser, no app "
                                "needed: step slider, narration, plan, buffer, Gate-1, retrievals with their score "
                                "bars, the score chart.")
        fork_box(path, ep, t)
        try:
            st.page_link("pages/6_Ask.py", label="Ask the agent about this episode", icon="💬",
                         query_params={"trace": sources.link_path(path)})
        except Exception:  # noqa: BLE001 - the page runs on its own (tests): no navigation to link into
            pass
        tour.show_again_button()
    tour.render_tour(ep.steps, t, example_open=Path(path).name == tour.EXAMPLE)
    resume_box(path, ep)
    par = ep.header.parent or {}
    if par:
        _parent_line(par, path)
    render_episode(ep.header, ep.steps, t, ep.summary, recorded=True)
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
                                    f"`{sources.link_path(target)}`"))
        t = follow.sidebar(ep, target)
    if ep is not None:
        follow.status_line(ep, t)
        render_episode(ep.header, ep.steps, t, ep.summary, recorded=True, lazy_steps=True)
    follow.watch(target, str(path) if path is not None else None, len(ep.steps) if ep is not None else -1)


def _toggle_play(n: int) -> None:
    playing = not S.get("run_playing")
    if playing and int(S.get("run_rec_step", 0)) >= n:
        S["run_rec_step"] = 0  # played to the end: Play starts again from the start
    S["run_playing"] = playing


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


def _parent_line(par: dict, path: str) -> None:
    """A fork says where it came from, with a link to the comparison."""
    c1, c2 = st.columns([3, 1])
    c1.info(f"This run is a fork of `{Path(par.get('trace', '?')).name}`: its first {par.get('step', 0)} steps replay "
            f"that episode's actions (checked against its observations); its own agent decides from step "
            f"{int(par.get('step', 0)) + 1} on.")
    q = {"a": sources.link_path(par.get("trace", "")), "b": sources.link_path(path)}
    try:
        c2.page_link("pages/5_Compare.py", label="Compare with the parent", icon="🔀", query_params=q)
    except Exception:  # noqa: BLE001 - the page runs on its own (tests): give the link as text
        c2.markdown(f"Compare: `compare?a={q['a']}&b={q['b']}`")


# ----------------------------------------------------------------------------- the page

# Streamlit forgets a widget's value when a run does not draw it (e.g. while the recorded view is shown);
# writing the values back keeps the live settings across a trip to the recorded view and back.
for _k in ("run_task", "run_split", "run_variation", "run_preset", "run_backend", "run_emb_model", "run_base_url",
           "run_llm_model", "run_llm_timeout", "run_llm_threads", "run_step_limit", "run_n_steps", "run_trace",
           "run_quick"):
    if _k in S:
        S[_k] = S[_k]

first_visit()
open_from_link()
follow.open_from_link()
st.title("SwiftSage Explorer: Run")
if S.get("run_link_error"):
    st.error(S.pop("run_link_error"))
do_continue()  # before the sidebar's widgets: a fork or resume sets their values (task, variation, preset)
st.caption(WHAT["page"])

with st.sidebar:
    st.header("Run")
    # a locked shared app has no live run: a visitor follows the teacher's run or replays recorded ones
    sources_shown = (["Live run"] if share.unlocked() else []) + ["Recorded episode", "Follow live"]
    if S.get("run_source") not in sources_shown:
        S["run_source"] = "Follow live" if S.get("run_source") == "Live run" else sources_shown[0]
    source = st.radio("Source", sources_shown, key="run_source", horizontal=True,
                      help="Run the agent now, replay an episode recorded earlier, or follow the run being "
                           "recorded right now (the teacher's), step by step as it happens.")
    share.passcode_box()

if source != "Follow live":
    follow.unregister()  # the server stops pushing new steps to this browser
if source == "Recorded episode":
    S["run_running"] = False
    recorded_view()
elif source == "Follow live":
    S["run_running"] = False
    follow_view()
else:
    with st.sidebar:
        settings = live_sidebar()
        live_buttons()
        agent = S.get("run_agent")
        if agent is not None and S.get("run_header") is not None and S.get("run_agent_key") != _settings_key(settings):
            st.info("Settings changed: press Reset to start a new episode with them.")
        if agent is not None and S.get("run_header") is not None and agent.trace_path is not None:
            fork_box(str(agent.trace_path), types.SimpleNamespace(header=S["run_header"], steps=list(agent.records)),
                     len(agent.records))
    wait_for_step_in_flight()
    if S.pop("run_paused_call", False):
        st.info("Paused. The model call in progress was stopped; that step took Swift's action instead and is "
                "recorded with the cancellation (see its LLM error). Press Step or Run to go on.")
    cmd = S.pop("run_cmd", None)
    if cmd == "reset":
        do_reset(settings)
    want_step = cmd == "step" or (cmd != "reset" and S.get("run_running"))
    if want_step and (S.get("run_agent") is None or S.get("run_header") is None):
        _fail("No episode yet: choose a task and press **Reset**.")
        want_step = False
    # the step's progress goes above the episode, which is drawn first: the last step stays readable (not
    # faded) while Swift or a model works on the next one
    progress_slot = st.container()
    if S.get("run_error"):
        st.error(S["run_error"])
    agent, header = S.get("run_agent"), S.get("run_header")
    if agent is None or header is None:
        st.info("Choose a task, a variation and a preset in the sidebar, then press **Reset** to start an "
                "episode and **Step** to watch the agent act. Or switch the source to *Recorded episode* to "
                "replay one.")
    else:
        records = list(agent.records)
        if header.parent:
            _parent_line(header.parent, str(agent.trace_path))
        render_episode(header, records, len(records), agent.summary, recorded=False, next_hint=next_hint(agent))
        if agent.trace_path is not None:
            st.caption(f"Recorded to `{agent.trace_path}`: open it later under *Recorded episode*. The class "
                       f"follows it live at **{follow.class_link()}** (from another machine, use this machine's "
                       f"network address).")
    if want_step and do_step(progress_slot):
        st.rerun()  # draw the new step
follow_open_request()  # "Open in the Memory explorer" was pressed in a Memory panel
