"""OpenAI-compatible HTTP backend: the production path for vLLM's server (`vllm serve MODEL`),
Ollama, llama.cpp's server or any endpoint speaking `/v1/chat/completions`.

The `openai` client does the HTTP work and its bounded retries (connection errors, 408/409/429/5xx,
with backoff); this class maps every failure onto the project's typed `LLMError`s.
"""
from __future__ import annotations

import threading
import time
from typing import Sequence

import httpx
import openai

from .base import (ChatResult, LLMBackend, LLMCancelled, LLMConnectionError, LLMHTTPError, LLMMalformedReply,
                   LLMTimeoutError, Message, ScoreResult, ScoringUnsupported, as_messages)


def _cancellable(fn, cancel: threading.Event, backend: str):
    """Run a blocking request in a helper thread and give up on it when `cancel` is set (the server may finish
    the abandoned request; its answer is dropped)."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    t = threading.Thread(target=run, name="llm-request", daemon=True)
    t0 = time.perf_counter()
    t.start()
    while t.is_alive():
        t.join(0.1)
        if cancel.is_set() and t.is_alive():
            raise LLMCancelled(backend, f"cancelled after {time.perf_counter() - t0:.1f} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class OpenAICompatBackend(LLMBackend):
    name = "openai"

    def __init__(self, base_url: str, model: str = "", api_key: str = "EMPTY", timeout: float = 120.0,
                 max_retries: int = 2, seed: int | None = None):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.seed = seed  # Config.seed, sent with each request (vLLM and OpenAI honour it for sampling)
        self._client = openai.OpenAI(base_url=self.base_url, api_key=api_key or "EMPTY",
                                     timeout=timeout, max_retries=max_retries)
        self.model = model or ""

    def resolve_model(self) -> str:
        """The served model's name: the configured one, else the server's first listed model."""
        if self.model:
            return self.model
        try:
            models = self._client.models.list()
        except Exception as e:  # mapped below with the same wording as chat failures
            raise self._map(e) from e
        ids = [m.id for m in models.data]
        if not ids:
            raise LLMMalformedReply(self.name, f"server at {self.base_url} lists no models; pass --model")
        self.model = ids[0]
        return self.model

    def chat(self, messages: str | Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0,
             stop: Sequence[str] | None = None, timeout: float | None = None,
             cancel: threading.Event | None = None) -> ChatResult:
        model = self.resolve_model()
        t0 = time.perf_counter()

        def request():
            return self._client.chat.completions.create(
                model=model, messages=as_messages(messages), max_tokens=max_tokens,
                temperature=temperature, stop=list(stop) if stop else None,
                timeout=timeout if timeout is not None else self.timeout, seed=self.seed,
            )

        try:
            resp = request() if cancel is None else _cancellable(request, cancel, self.name)
        except LLMCancelled:
            raise
        except Exception as e:
            raise self._map(e) from e
        latency = time.perf_counter() - t0
        choices = getattr(resp, "choices", None)
        if not choices:
            raise LLMMalformedReply(self.name, f"reply from {self.base_url} has no choices: {str(resp)[:200]}")
        msg = choices[0].message
        text = getattr(msg, "content", None)
        if text is None or not str(text).strip():
            raise LLMMalformedReply(self.name, f"empty reply from {self.base_url} (finish_reason="
                                                f"{choices[0].finish_reason!r})")
        usage = getattr(resp, "usage", None)
        return ChatResult(
            text=str(text), prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0, latency_s=latency,
            backend=self.name, model=getattr(resp, "model", None) or model,
            finish_reason=choices[0].finish_reason or "",
        )

    # ------------------------------------------------------------------ scoring given replies (vLLM)
    def _post(self, url: str, body: dict, timeout: float) -> dict:
        headers = {"Authorization": f"Bearer {self._client.api_key}"}
        try:
            r = httpx.post(url, json=body, headers=headers, timeout=timeout)
        except Exception as e:  # noqa: BLE001 - mapped like chat failures
            raise self._map(e) from e
        if r.status_code in (404, 405):
            raise ScoringUnsupported(self.name, f"{url} answered HTTP {r.status_code}: this server cannot score "
                                                f"replies (vLLM's /tokenize and prompt_logprobs are needed)")
        if r.status_code >= 400:
            raise LLMHTTPError(self.name, f"HTTP {r.status_code} from {url}: {r.text[:300]}", status=r.status_code)
        try:
            return r.json()
        except ValueError as e:
            raise LLMMalformedReply(self.name, f"malformed reply from {url}: {e}") from e

    def score(self, messages: str | Sequence[Message], continuations: Sequence[str], *,
              timeout: float | None = None) -> ScoreResult:
        """vLLM: the server renders its own chat template (`/tokenize` with messages), each continuation is the
        assistant's whole reply (the template's end-of-turn included), and one `/v1/completions` request with
        `prompt_logprobs` scores them all; the shared prompt is read once thanks to vLLM's prefix cache."""
        model = self.resolve_model()
        limit = timeout if timeout is not None else self.timeout
        root = self.base_url.removesuffix("/v1")
        t0 = time.perf_counter()
        msgs = as_messages(messages)
        prefix = self._post(f"{root}/tokenize", {"model": model, "messages": msgs, "add_generation_prompt": True},
                            limit).get("tokens")
        if not isinstance(prefix, list) or not prefix:
            raise ScoringUnsupported(self.name, f"{root}/tokenize gave no tokens for the prompt")
        prompts = []
        for c in continuations:
            full = self._post(f"{root}/tokenize", {"model": model, "messages": msgs + [{"role": "assistant",
                                                                                       "content": c}],
                                                   "add_generation_prompt": False}, limit).get("tokens") or []
            if full[:len(prefix)] != prefix or len(full) <= len(prefix):
                raise LLMMalformedReply(self.name, "the chat template does not extend the prompt with the reply")
            prompts.append(full)
        out = self._post(f"{self.base_url}/completions", {"model": model, "prompt": prompts, "max_tokens": 1,
                                                           "temperature": 0.0, "prompt_logprobs": 0}, limit)
        choices = sorted(out.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != len(prompts) or any(c.get("prompt_logprobs") is None for c in choices):
            raise ScoringUnsupported(self.name, f"{self.base_url}/completions returned no prompt_logprobs")
        sums, counts = [], []
        for toks, ch in zip(prompts, choices):
            lps = ch["prompt_logprobs"]
            total = 0.0
            for pos in range(len(prefix), len(toks)):
                entry = lps[pos] or {}
                got = entry.get(str(toks[pos]))
                if got is None:
                    raise LLMMalformedReply(self.name, f"no log-probability for prompt token {pos}")
                total += float(got["logprob"] if isinstance(got, dict) else got)
            sums.append(total)
            counts.append(len(toks) - len(prefix))
        usage = out.get("usage") or {}
        return ScoreResult(logprobs=sums, tokens=counts, prompt_tokens=int(usage.get("prompt_tokens", 0) or 0),
                           scored_tokens=sum(counts), latency_s=time.perf_counter() - t0, backend=self.name,
                           model=model)

    def _map(self, e: Exception) -> Exception:
        where = self.base_url
        if isinstance(e, openai.APITimeoutError) or isinstance(e, httpx.TimeoutException):
            return LLMTimeoutError(self.name, f"no reply from {where} within {self.timeout:g} s "
                                              f"(after {self.max_retries} retries)")
        if isinstance(e, openai.APIConnectionError):
            cause = e.__cause__ or e
            return LLMConnectionError(self.name, f"cannot reach the LLM server at {where} "
                                                 f"({type(cause).__name__}: {cause}); is it running?")
        if isinstance(e, openai.APIStatusError):
            body = ""
            try:
                body = e.response.text[:300]
            except Exception:
                pass
            return LLMHTTPError(self.name, f"HTTP {e.status_code} from {where}: {body or e.message}",
                                status=e.status_code)
        if isinstance(e, (ValueError, TypeError, KeyError)) or type(e).__name__ == "APIResponseValidationError":
            return LLMMalformedReply(self.name, f"malformed reply from {where}: {e}")
        return LLMConnectionError(self.name, f"request to {where} failed: {type(e).__name__}: {e}")
