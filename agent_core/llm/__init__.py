"""LLM backends behind one interface: OpenAI-compatible HTTP, embedded llama.cpp, scripted."""
from __future__ import annotations

from .base import (ChatResult, LLMBackend, LLMCancelled, LLMConnectionError, LLMError, LLMExhausted, LLMHTTPError,
                   LLMMalformedReply, LLMTimeoutError, Message, ScoreResult, ScoringUnsupported, as_messages,
                   failure_of, prompt_text)
from .scripted import ScriptedBackend

BACKENDS = ("embedded", "openai", "scripted")


def make_backend(llm_cfg, script=None, seed: int = 0) -> LLMBackend:
    """Build the backend an `LLMConfig` names; `seed` (Config.seed) goes to the model's sampler."""
    if llm_cfg.backend == "openai":
        from .openai_compat import OpenAICompatBackend

        import os

        key = llm_cfg.api_key or os.environ.get("SWIFTSAGE_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        return OpenAICompatBackend(llm_cfg.base_url, model=llm_cfg.model, api_key=key,
                                   timeout=llm_cfg.timeout_s, max_retries=llm_cfg.max_retries, seed=seed)
    if llm_cfg.backend == "embedded":
        from .embedded import EmbeddedBackend

        return EmbeddedBackend(llm_cfg.embedded_model, n_ctx=llm_cfg.n_ctx, n_threads=llm_cfg.n_threads,
                               timeout=llm_cfg.timeout_s, seed=seed)
    if llm_cfg.backend == "scripted":
        if script is None:
            raise ValueError("the scripted backend needs a script (tests only)")
        return ScriptedBackend(script)
    raise ValueError(f"unknown LLM backend {llm_cfg.backend!r}; choose one of: {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "ChatResult", "LLMBackend", "LLMCancelled", "LLMConnectionError", "LLMError", "LLMExhausted",
           "LLMHTTPError", "LLMMalformedReply", "LLMTimeoutError", "Message", "ScoreResult", "ScoringUnsupported",
           "ScriptedBackend",
           "as_messages", "failure_of", "make_backend", "prompt_text"]
