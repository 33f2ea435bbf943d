"""The agent a live run drives: the trained Swift model, the chosen LLM backend and a ScienceWorld JVM of its own.

Tests run the page without slow models by putting a callable `cfg -> Agent` under `agent_factory` in the
session state before the first run; without it the real agent is built."""
from __future__ import annotations

import dataclasses
import json
import weakref
from typing import Any, Callable

import streamlit as st

from agent_core.config import Config, SwiftConfig, apply_overrides, preset
from agent_core.llm.base import turn_text
from session.llm import llm_backend
from views import share, sources
from views.run_sidebar import LiveSettings


@st.cache_resource(show_spinner="Loading the Swift model (once per server)...")
def _swift_policy(swift_cfg_json: str):
    """The trained Swift model: read-only, shared by every browser session."""
    from agent_core.controller import load_swift

    cfg = Config(swift=SwiftConfig(**json.loads(swift_cfg_json)))
    return load_swift(cfg)


class AnnouncingLLM:
    """Forwards every call to a shared backend and tells the page first, so a slow call says what it is."""

    def __init__(self, inner):
        self._inner = inner
        self.on_call = None  # set around one step by its worker
        self.cancel = None  # the step's threading.Event: Pause sets it and the call in flight stops

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def for_agent(self) -> "AnnouncingLLM":
        """The agent's own view of the shared backend (its own prompt cache), still announced and cancellable."""
        return AnnouncingLLM(self._inner.for_agent())

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


def product_agent(cfg: Config):
    """The real agent: trained Swift + the chosen LLM backend + its own ScienceWorld JVM."""
    from agent_core.controller import Agent

    swift = _swift_policy(json.dumps(dataclasses.asdict(cfg.swift)))
    llm = AnnouncingLLM(llm_backend(cfg.llm))
    # reflection (AMM) runs between episodes in the background, so no step waits minutes for it
    agent = Agent(cfg, swift, llm, runs_dir=sources.runs_dir(), reflect_in_background=True)
    weakref.finalize(agent, _close_env, agent.env)  # a session that goes away frees its JVM
    return agent


def factory() -> Callable[[Config], Any]:
    return st.session_state.get("agent_factory") or product_agent


def settings_key(s: LiveSettings) -> tuple:
    """What the session's agent was built with: a change means a new agent at the next Reset (the task and
    variation only start a new episode)."""
    made_by = st.session_state.get("agent_factory")
    return (s.preset, s.backend, s.embedded_model, s.base_url, s.llm_model, s.llm_timeout, s.llm_threads,
            s.step_limit, s.memory_store, s.quick, id(made_by) if made_by else None)


def build_config(s: LiveSettings) -> Config:
    cfg = preset(s.preset)
    cfg = apply_overrides(cfg, {"llm.backend": s.backend, "llm.embedded_model": s.embedded_model,
                                "llm.base_url": s.base_url, "llm.model": s.llm_model,
                                "llm.timeout_s": s.llm_timeout, "llm.n_threads": s.llm_threads,
                                "env.step_limit": s.step_limit, "amm.store_dir": s.memory_store})
    if share.share_mode():  # a shared app: the operator's LLM, whatever the session state holds
        cfg.llm = dataclasses.replace(share.operator().llm(), timeout_s=float(s.llm_timeout))
    if s.quick:  # quick demo: no model call at all (Sage, the Critic, reflection between episodes)
        cfg = apply_overrides(cfg, {"controller.sage_enabled": False, "srm.critic_enabled": False,
                                    "amm.reflection": "off"})
    return cfg
