"""The Generative Agents memory stream on Chroma (docs/AGENT.md §7): the store behind AMM.

Depends on neither agent_core nor pages. Typical use:

    stream = open_stream(MemoryConfig())                  # persistent, shared per process
    rating = rate_importance(text, generate)              # LLM 1..10, default on failure
    stream.add(text, now=step, importance=rating.value, importance_error=rating.error or "")
    result = stream.retrieve("where is the thermometer", now=step, trigger="T4")
    record["retrievals"].append(result.to_dict())
    reflection = maybe_reflect(stream, generate, now=step)  # None below the threshold
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

from memory_store.config import ENV_MEMORY_DIR, MemoryConfig
from memory_store.embeddings import EMBEDDING_DIM, Embedder, get_embedder
from memory_store.reflection import (ImportanceRating, Insight, LLMExchange, ReflectionResult, maybe_reflect,
                                     rate_importance, reflect, should_reflect)
from memory_store.scoring import RetrievalResult, ScoredCandidate
from memory_store.stream import (MEMORY_TYPES, TAG_COLORS, TYPE_COLORS, Memory, MemoryStream, load_demo_items,
                                 seed_demo)

_streams: dict[tuple[str, str, str], MemoryStream] = {}
_streams_lock = threading.Lock()


def open_stream(config: MemoryConfig | None = None, path: str | None = None) -> MemoryStream:
    """The process-wide MemoryStream for a directory and collection: the agent and the Memory page
    in one Streamlit server share it, so the page sees the agent's writes at once."""
    cfg = config or MemoryConfig()
    where = cfg.server_url or str(Path(path or cfg.persist_dir).resolve())
    # the settings are part of the key: a caller with other weights, decay or caps gets its own view of the same
    # store (Chroma shares the client by path; `refresh()` shows one view's writes to the other), never a
    # stream silently scoring with someone else's settings
    settings = json.dumps({k: v for k, v in cfg.to_dict().items() if k != "persist_dir"}, sort_keys=True)
    key = (where, cfg.collection, settings)
    with _streams_lock:
        stream = _streams.get(key)
        if stream is None:
            stream = _streams[key] = MemoryStream(cfg, path=where)
        return stream


def close_stream(stream: MemoryStream) -> None:
    """Close a stream that `open_stream` handed out and forget it (every settings view of it), so its Chroma client and
    in-memory index are freed; the next `open_stream` of its directory opens it afresh. For stores only one part
    of the app uses (the Ask page's episode stores), never for the agent's."""
    with _streams_lock:
        for key in [k for k, v in _streams.items() if v.path == stream.path]:
            _streams.pop(key).release()


__all__ = [
    "ENV_MEMORY_DIR", "EMBEDDING_DIM", "MEMORY_TYPES", "TYPE_COLORS", "Embedder", "ImportanceRating", "Insight",
    "LLMExchange", "Memory", "MemoryConfig", "close_stream", "MemoryStream", "ReflectionResult", "RetrievalResult",
    "ScoredCandidate", "TAG_COLORS", "get_embedder", "load_demo_items", "maybe_reflect", "open_stream", "rate_importance",
    "reflect", "seed_demo", "should_reflect",
]
