"""The LLM backends the pages call: one per backend settings, shared by every session of the server (the embedded
model is loaded once and serializes its calls), and the embedded model a page preselects."""
from __future__ import annotations

import dataclasses
import json
import os

import streamlit as st

from agent_core.config import LLMConfig
from agent_core.llm.embedded import MODELS as EMBEDDED_MODELS
from views import share

_default = os.environ.get("SWIFTSAGE_DEFAULT_EMBEDDED_MODEL") or LLMConfig().embedded_model
# SWIFTSAGE_DEFAULT_EMBEDDED_MODEL=smollm2-135m preselects the fast model (demos on a slow machine, tests)
DEFAULT_EMBEDDED = _default if _default in EMBEDDED_MODELS else LLMConfig().embedded_model


@st.cache_resource(show_spinner="Preparing the LLM backend...")
def _backend(llm_cfg_json: str):
    from agent_core.llm import make_backend

    return make_backend(LLMConfig(**json.loads(llm_cfg_json)))


def llm_backend(cfg: LLMConfig):
    """The shared backend for these settings. In a shared app, only the operator's server URL is ever used (so
    their API key goes nowhere else): anything else raises PermissionError before a request is made."""
    share.check_llm(cfg)
    return _backend(json.dumps(dataclasses.asdict(cfg), sort_keys=True))
