"""Scripted backend: replays canned outputs, for deterministic tests only."""
from __future__ import annotations

import threading
import time
from typing import Callable, Sequence

from .base import (ChatResult, LLMBackend, LLMCancelled, LLMError, LLMExhausted, Message, ScoreResult,
                   ScoringUnsupported, as_messages, prompt_text, turn_text)

Script = Sequence[str | Exception] | Callable[[str], str]
Scorer = Callable[[str, str], float]  # (the message answered, a continuation) -> its mean log-probability


class ScriptedBackend(LLMBackend):
    """Outputs come from a list (in order; an Exception item is raised) or from a function of the
    message being answered (the prompt, or a conversation's last user turn: `turn_text`). Every call's
    whole prompt is kept in `calls` so tests can assert what the agent asked."""

    name = "scripted"

    def __init__(self, script: Script, model: str = "scripted", scorer: Scorer | None = None):
        self.model = model
        self._scorer = scorer  # None: this backend cannot score (Sage generates its pick, as with a plain server)
        self._fn = script if callable(script) else None
        self._items = list(script) if not callable(script) else []
        self.calls: list[str] = []

    def score(self, messages: str | Sequence[Message], continuations: Sequence[str], *,
              timeout: float | None = None) -> ScoreResult:
        if self._scorer is None:
            raise ScoringUnsupported(self.name, "no scorer given")
        t0 = time.perf_counter()
        prompt = prompt_text(as_messages(messages))
        self.calls.append(prompt)
        item = turn_text(messages)
        means = [float(self._scorer(item, c)) for c in continuations]
        if any(isinstance(m, float) and m != m for m in means):
            raise LLMError(self.name, "the scorer returned NaN")
        return ScoreResult(logprobs=means, tokens=[1] * len(means), prompt_tokens=len(prompt.split()),
                           scored_tokens=len(means), latency_s=time.perf_counter() - t0, backend=self.name,
                           model=self.model)

    def chat(self, messages: str | Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0,
             stop: Sequence[str] | None = None, timeout: float | None = None,
             cancel: threading.Event | None = None) -> ChatResult:
        t0 = time.perf_counter()
        if cancel is not None and cancel.is_set():
            raise LLMCancelled(self.name, "cancelled before the call started")
        prompt = prompt_text(as_messages(messages))
        self.calls.append(prompt)
        if self._fn is not None:
            text = self._fn(turn_text(messages))
        else:
            if not self._items:
                raise LLMExhausted(self.name, f"script exhausted after {len(self.calls) - 1} calls")
            item = self._items.pop(0)
            if isinstance(item, Exception):
                if isinstance(item, LLMError):
                    raise item
                raise LLMError(self.name, f"{type(item).__name__}: {item}")
            text = item
        if stop:
            cut = [text.find(s) for s in stop if s and s in text]
            if cut:
                text = text[: min(cut)]
        return ChatResult(text=text, prompt_tokens=len(prompt.split()), completion_tokens=len(text.split()),
                          latency_s=time.perf_counter() - t0, backend=self.name, model=self.model,
                          finish_reason="stop")
