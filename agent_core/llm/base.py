"""The one small interface every LLM backend implements, and its errors.

Sage, the Critic and the memory's importance rater all talk to a model through `LLMBackend.chat`.
Errors are typed so the agent can record them in the step record and fall back to the baseline
path (docs/AGENT.md §9): it never crashes an episode silently.
"""
from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": "..."}


class LLMError(RuntimeError):
    """Base class: the model gave no usable reply. `backend` names who failed."""

    def __init__(self, backend: str, message: str):
        self.backend = backend
        super().__init__(f"[{backend}] {message}")


class LLMConnectionError(LLMError):
    """The server could not be reached (refused, reset, went away mid-request)."""


class LLMTimeoutError(LLMError):
    """No complete reply within the timeout."""


class LLMHTTPError(LLMError):
    """The server answered with an HTTP error status."""

    def __init__(self, backend: str, message: str, status: int | None = None):
        self.status = status
        super().__init__(backend, message)


class LLMMalformedReply(LLMError):
    """The server answered, but the reply holds no usable text (empty, no choices, wrong shape)."""


class LLMCancelled(LLMError):
    """The caller gave up on the call while it ran (the Run page's Pause): recorded like any failure."""


class LLMExhausted(LLMError):
    """A scripted backend ran out of canned outputs."""


@dataclass
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    backend: str
    model: str
    finish_reason: str = ""
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class ScoreResult:
    """How likely the model finds each continuation as its whole reply after one shared prompt: the sum of the
    tokens' log-probabilities and their count (the reply's end token included, so `pick up cup` is not scored as
    the start of `pick up cup containing water`). `mean` is the length-normalised score a pick compares."""

    logprobs: list[float]
    tokens: list[int]
    prompt_tokens: int  # tokens of the shared prompt (of which `cached_tokens` were not read again)
    scored_tokens: int  # continuation tokens read, all options together
    latency_s: float
    backend: str
    model: str
    cached_tokens: int = 0  # tokens of the shared prompt the model still held from the call before
    cache_state: str = ""  # embedded only: held | restored | empty | lost (EmbeddedBackend's per-agent cache)

    @property
    def mean(self) -> list[float]:
        return [lp / max(1, n) for lp, n in zip(self.logprobs, self.tokens)]


class ScoringUnsupported(LLMError):
    """This backend or server cannot score given replies (no prompt log-probabilities): the caller generates."""


# the step record keeps a failed call's kind next to its message (LLMCall.error_kind), so a report counts timeouts and
# a page tells a Pause from a failure without reading the message's words
ERROR_KINDS: tuple[tuple[type[LLMError], str], ...] = (
    (LLMTimeoutError, "timeout"), (LLMConnectionError, "connection"), (LLMHTTPError, "http"),
    (LLMMalformedReply, "malformed"), (LLMCancelled, "cancelled"), (LLMExhausted, "exhausted"))


def failure_of(e: BaseException, backend: str) -> tuple[str, str]:
    """An exception from a model call as the step record keeps it: (message, kind). Kind: one of ERROR_KINDS' names,
    `llm` for another LLMError, `crash` for an exception that is not an LLMError (e.g. a RuntimeError in llama.cpp)."""
    if isinstance(e, LLMError):
        return str(e), next((kind for cls, kind in ERROR_KINDS if isinstance(e, cls)), "llm")
    return f"{type(e).__name__} in the {backend} backend: {e}", "crash"


def as_messages(prompt: str | Sequence[Message], system: str | None = None) -> list[Message]:
    if isinstance(prompt, str):
        msgs: list[Message] = [{"role": "user", "content": prompt}]
    else:
        msgs = [dict(m) for m in prompt]
    if system and not any(m["role"] == "system" for m in msgs):
        msgs.insert(0, {"role": "system", "content": system})
    return msgs


def turn_text(messages: str | Sequence[Message]) -> str:
    """The message a call answers: the prompt itself, or the last user turn of a conversation (Sage's numbered
    pick continues the plan's conversation: its last turn is the list)."""
    if isinstance(messages, str):
        return messages
    users = [m["content"] for m in messages if m.get("role") == "user"]
    return users[-1] if users else prompt_text(messages)


def prompt_text(messages: Sequence[Message]) -> str:
    """The exact prompt as one readable string, for step records and the app."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)


def cache_files(trace: Path) -> tuple[Path, Path]:
    """An episode's kept LLM cache beside its trace: the cache's bytes, and the stamp naming the step they are of."""
    trace = Path(trace)
    return trace.with_name(trace.name + ".llmcache"), trace.with_name(trace.name + ".llmcache.json")


class LLMBackend(ABC):
    """Chat completion with max tokens, temperature, stop strings and a timeout."""

    name: str = "base"
    model: str = ""

    @abstractmethod
    def chat(self, messages: str | Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0,
             stop: Sequence[str] | None = None, timeout: float | None = None,
             cancel: threading.Event | None = None) -> ChatResult:
        """`cancel`: when set while the call runs, the call stops as soon as it can and raises LLMCancelled."""
        ...

    def score(self, messages: str | Sequence[Message], continuations: Sequence[str], *,
              timeout: float | None = None) -> ScoreResult:
        """The log-probability of each continuation as the assistant's reply to `messages` (one shared prompt,
        read once). Backends that cannot raise ScoringUnsupported."""
        raise ScoringUnsupported(self.name, "this backend cannot score replies")

    def score_alone(self, messages: str | Sequence[Message], continuations: Sequence[str], *,
                    timeout: float | None = None) -> list[float]:
        """Each continuation's summed log-probability as the reply to a short prompt that says nothing of the
        state (how likely the text is in itself: Sage's pick subtracts it, `sage.pick_rule = pmi`). A backend with
        a cache of the conversation overrides this so that the conversation stays cached."""
        return self.score(messages, continuations, timeout=timeout).logprobs

    def for_agent(self) -> "LLMBackend":
        """The backend one agent calls (Agent keeps it). A backend whose answers depend on what was asked before it
        (the embedded model's prompt cache) gives each agent its own view, so one session's calls never change
        another's answers; the default is the backend itself."""
        return self

    def save_cache_file(self, trace: Path, step: int) -> None:
        """Keep what the calls so far left behind that changes later answers (the embedded model's prompt cache)
        beside the episode's trace, after step `step`. Default: nothing is kept, nothing to write."""

    def load_cache_file(self, trace: Path, step: int) -> str:
        """A resume after step `step`: take back what `save_cache_file` kept. Returns "" when the backend is as the
        uninterrupted run had it (nothing kept: always), else why not."""
        return ""

    def new_episode(self) -> None:
        """An episode starts (or resumes): forget what earlier calls left behind that could change this episode's
        answers (a backend with a prompt cache empties it). Default: nothing is kept."""

    def generate(self, prompt: str) -> str:
        """Plain prompt -> text; the callable shape memory_store expects."""
        return self.chat(prompt).text

    def close(self) -> None:  # pragma: no cover - default is nothing to release
        pass


def elapsed(t0: float) -> float:
    return time.perf_counter() - t0
