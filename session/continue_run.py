"""Continuing a recorded episode as this session's live run: fork (rerun from a recorded step under a chosen
preset) or resume (go on with an interrupted episode in its own trace). A new agent replays the recorded actions
in a fresh JVM, checking each observation against the record, then plays on."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from agent_core.config import Config, LLMConfig
from agent_core.trace import TraceError, read_episode
from session import live_run
from session.agent_factory import build_config, factory, settings_key
from session.llm import DEFAULT_EMBEDDED
from views import share
from views.run_sidebar import LiveSettings

S = st.session_state


@dataclass(frozen=True)
class ContinueRequest:
    kind: str  # fork | resume
    path: str  # the recorded trace
    step: int  # the recorded steps to replay (resume: all of them)
    preset: str = ""  # fork: the preset that plays on (resume keeps the recorded one)
    quick: bool = False


def _request(req: ContinueRequest) -> None:
    rs = live_run.session()
    rs.request, rs.running = req, False
    S["run_source"] = "Live run"


def request_resume(path: str, steps: int) -> None:
    """Resume's on_click: the next script run continues the trace, before the sidebar is drawn."""
    _request(ContinueRequest("resume", path, steps))


def request_fork(path: str, step: int, preset: str, quick: bool) -> None:
    """Fork's on_click: the next script run forks the trace at `step`, before the sidebar is drawn."""
    _request(ContinueRequest("fork", path, step, preset, quick))


def fork_settings(header, pre: str, quick: bool) -> LiveSettings:
    """The live sidebar's settings for a fork: the recorded task, the chosen preset, this session's LLM."""
    d_llm = LLMConfig()
    return LiveSettings(task=header.task, split=header.split or "test", variation=header.variation, preset=pre,
                        backend=S.get("run_backend", "embedded"),
                        embedded_model=S.get("run_emb_model", DEFAULT_EMBEDDED),
                        base_url=S.get("run_base_url", d_llm.base_url), llm_model=S.get("run_llm_model", ""),
                        llm_timeout=float(S.get("run_llm_timeout", d_llm.timeout_s)),
                        llm_threads=int(S.get("run_llm_threads", d_llm.n_threads)),
                        step_limit=int(S.get("run_step_limit", Config().env.step_limit)), memory_store="",
                        quick=quick)


def do_continue() -> None:
    """Carry out a fork or resume requested by the last click; call it before the sidebar's widgets are drawn,
    since it sets their values (task, variation, preset) to the continued episode's."""
    rs = live_run.session()
    req, rs.request = rs.request, None
    if req is None:
        return
    from agent_core.controller import ReplayError

    what, pre, quick, t = req.kind, req.preset, req.quick, req.step
    if not share.unlocked():
        return live_run.fail(f"Cannot {what}: this shared app is locked; only the teacher (with the passcode) "
                             f"starts runs.")
    try:
        ep = read_episode(req.path)
        if what == "resume":  # the recorded configuration, with this session's LLM settings
            pre = ep.header.config.get("preset", "baseline")
            s = fork_settings(ep.header, pre, quick)
            cfg = Config.from_dict(ep.header.config)
            cfg.llm = build_config(s).llm
            t = len(ep.steps)
        else:
            s = fork_settings(ep.header, pre, quick)
            cfg = build_config(s)
        cfg.env.fresh_jvm = True
    except (TraceError, OSError, ValueError) as e:
        return live_run.fail(f"Cannot {what}: {e}")
    try:
        with rs.lock:
            live_run.drop_agent(rs)
            with st.status(f"{'Forking' if what == 'fork' else 'Resuming'} at step {t}: loading the agent, replaying "
                           f"{t} recorded actions in a fresh ScienceWorld and checking each observation...") as status:
                agent = factory()(cfg)
                rs.agent = agent
                rs.header = agent.fork(ep, t) if what == "fork" else agent.resume(ep)
                status.update(label=f"{t} steps replayed and checked; {pre} plays on from here", state="complete")
        for k, v in (("run_task", s.task), ("run_split", s.split), ("run_variation", s.variation),
                     ("run_preset", pre), ("run_quick", quick)):
            S[k] = v
        rs.agent_key, rs.error = settings_key(s), None
    except ReplayError as e:
        live_run.fail(f"Cannot {what}: {e}")
    except Exception as e:  # noqa: BLE001 - a JVM / model failure must show up, not crash the page
        live_run.log.exception("%s failed", what)
        live_run.fail(f"{what.capitalize()} failed: {type(e).__name__}: {e}")
