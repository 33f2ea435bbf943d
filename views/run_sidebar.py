"""The Run page's live sidebar: the task, preset and LLM widgets (read back as one LiveSettings) and the run
buttons. Drawing only; what a button does is the callback the page passes in."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import streamlit as st

from agent_core.config import PRESETS, Config, LLMConfig, preset
from agent_core.env import SPLITS, catalog
from agent_core.llm.embedded import MODELS as EMBEDDED_MODELS
from agent_core.variation_texts import variation_text
from views import share, sources

S = st.session_state

@dataclass(frozen=True)
class LiveSettings:
    """What the live sidebar asks for: the episode to start and the agent to start it with."""

    task: str
    split: str
    variation: int
    preset: str
    backend: str
    embedded_model: str
    base_url: str
    llm_model: str
    llm_timeout: float
    llm_threads: int
    step_limit: int
    memory_store: str = ""  # "": the preset's own store; else this session's fresh copy
    quick: bool = False  # Swift alone: no model call at all


def live_sidebar(default_embedded: str) -> LiveSettings:
    cat = catalog()
    names = cat.names()
    task = st.selectbox("Task", names, key="run_task", persist_state="session", format_func=lambda n: f"{cat.get(n).index}: {n}",
                        help="One of ScienceWorld's 30 science tasks.")
    info = cat.get(task)
    about = st.empty()  # the variation's own text, once the variation is chosen below
    S.setdefault("run_split", "test")
    split = st.selectbox("Split", SPLITS, key="run_split", persist_state="session",
                         help="Variations are split into train (Swift learned from them), dev and test "
                              "(never seen in training; used for scoring).")
    options = info.variations(split)
    if S.get("run_variation") not in options and options:
        S["run_variation"] = options[0]
    variation = st.selectbox("Variation", options, key="run_variation", persist_state="session",
                             help=f"The {len(options)} {split} variations of this task (objects and rooms differ).")
    own = variation_text(task, variation) if variation is not None else None
    about.caption(f"**{info.title}** ({info.topic}). " + (own or f"{info.description} (the task's general text: "
                  f"variation {variation}'s own objects and rooms show in the step header after Reset)"))
    names_p = list(PRESETS)
    pre = st.selectbox("Preset", names_p, key="run_preset", persist_state="session", format_func=lambda p: p,
                       help="Which modules are on (Configurations page has every number).")
    st.caption(PRESETS[pre][0])
    memory_store = ""
    if preset(pre).amm.enabled:
        S.setdefault("run_memory", "continue")
        mem = st.radio("Episodic memory", ["continue", "fresh"], key="run_memory", persist_state="session", horizontal=True,
                       format_func={"continue": "keep learning", "fresh": "fresh copy"}.get,
                       help="Keep learning: every episode writes into the agent's store (runs/memory/agent), so "
                            "what it learns carries over to your next episodes. Fresh copy: this browser session "
                            "starts from a new copy of the shipped warm store (or an empty one for weak memory), "
                            "so a demo is repeatable.")
        if mem == "fresh":
            S.setdefault("run_memory_session", time.strftime("%Y%m%d-%H%M%S"))
            memory_store = str(sources.runs_dir() / "memory" / f"session-{S['run_memory_session']}-{pre}")
    quick = st.toggle("Quick demo: Swift alone", key="run_quick", persist_state="session",
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
        backend, emb, base_url, model = llm_widgets(default_embedded)
    d_llm, d_env = LLMConfig(), Config().env
    S.setdefault("run_llm_timeout", int(d_llm.timeout_s))
    S.setdefault("run_llm_threads", d_llm.n_threads)
    S.setdefault("run_step_limit", d_env.step_limit)
    threads = S["run_llm_threads"]
    with st.expander("Advanced"):
        timeout = st.number_input("Sage call timeout (s)", min_value=5, max_value=1800,
                                  key="run_llm_timeout", persist_state="session", help="A model call that takes longer is stopped and recorded "
                                  "as an error; the agent then falls back to Swift's action (`llm.timeout_s`).")
        if not share.share_mode():
            threads = st.number_input("LLM CPU threads (embedded; 0 = auto)", min_value=0, max_value=64,
                                      key="run_llm_threads", persist_state="session", help="Threads llama.cpp uses (`llm.n_threads`). 0 "
                                      "chooses at every call: all cores when the others are idle, one fewer per busy "
                                      "core (a llama.cpp thread sharing its core with another program stalls the "
                                      "rest).")
        limit = st.number_input("Step limit", min_value=1, max_value=1000,
                                key="run_step_limit", persist_state="session", help="The episode ends after this many steps "
                                "(`env.step_limit`, 100 in the paper's protocol).")
    return LiveSettings(task=task, split=split, variation=variation, preset=pre, backend=backend,
                        embedded_model=emb, base_url=base_url, llm_model=model, llm_timeout=float(timeout),
                        llm_threads=int(threads), step_limit=int(limit), memory_store=memory_store, quick=bool(quick))


def llm_widgets(default_embedded: str) -> tuple[str, str, str, str]:
    """The LLM choice (a local app only): backend, embedded model, server URL, model name."""
    op = share.operator_or_default()  # the operator's settings preselect the widgets
    S.setdefault("run_backend", op.backend)
    backend = st.selectbox("LLM backend (Sage)", ["embedded", "openai"], key="run_backend", persist_state="session",
                           format_func=lambda b: {"embedded": "embedded (offline, on this CPU)",
                                                  "openai": "OpenAI-compatible server (vLLM, Ollama, ...)"}[b],
                           help="Which language model plays Sage.")
    emb_keys = list(EMBEDDED_MODELS)
    emb, base_url, model = LLMConfig().embedded_model, LLMConfig().base_url, ""
    if backend == "embedded":
        S.setdefault("run_emb_model", default_embedded)
        emb = st.selectbox("Embedded model", emb_keys, key="run_emb_model", persist_state="session",
                           format_func=lambda k: EMBEDDED_MODELS[k].title,
                           help="Qwen2.5-Coder-1.5B plans coherently but takes ~20 s per Sage call (plan and "
                                "pick) on a 2-core CPU, ~4 s to review a focus; SmolLM2-135M answers in seconds but "
                                "its plans are poor.")
    else:
        S.setdefault("run_base_url", op.base_url)
        S.setdefault("run_llm_model", op.model)
        base_url = st.text_input("Server URL", key="run_base_url", persist_state="session",
                                 help="The /v1 address of an OpenAI-compatible server, e.g. vLLM's.")
        model = st.text_input("Model name", key="run_llm_model", persist_state="session",
                              help="The model name the server serves (empty: the server's default).")
    return backend, emb, base_url, model


def live_buttons(on_cmd: Callable[[str], None], running: bool, left: int | None) -> None:
    """Reset, Step, Run N, Run to end, Pause; each calls `on_cmd` with its command's name."""
    c1, c2 = st.columns(2)
    c1.button("Reset", key="run_reset", type="primary", on_click=on_cmd, args=("reset",), width="stretch",
              help="Start a new episode with the settings above (a new recorded trace).")
    c2.button("Step", key="run_step", on_click=on_cmd, args=("step",), width="stretch",
              help="Take one environment step.")
    S.setdefault("run_n_steps", 5)
    n = st.number_input("N steps", min_value=1, max_value=100, key="run_n_steps", persist_state="session",
                        help="How many steps 'Run N' takes (it stops earlier when the episode ends).")
    c3, c4 = st.columns(2)
    c3.button(f"Run {int(n)} steps", key="run_run_n", on_click=on_cmd, args=("run_n",), width="stretch")
    c4.button("Run to end", key="run_run_end", on_click=on_cmd, args=("run_end",), width="stretch",
              help="Step until the episode ends (success, failure, or the step limit).")
    st.button("Pause", key="run_pause", on_click=on_cmd, args=("pause",), width="stretch",
              help="Stop running. A model call in progress is stopped at once: that step takes Swift's action "
                   "instead and is recorded with the cancellation.")
    if running:
        st.caption(f"Running{'' if left is None else f': {left} step(s) left'}... press Pause to stop.")
