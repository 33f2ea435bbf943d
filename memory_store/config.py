"""Every number of the memory stream (docs/AGENT.md §7) as a named field with its default.

agent_core's `Config` embeds this dataclass as `memory`, so every field is a plain
int / float / str / bool (its typed loader coerces those) and `to_dict` / `from_dict` round-trip.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

ENV_MEMORY_DIR = "SWIFTSAGE_MEMORY_DIR"
ENV_CHROMA_URL = "SWIFTSAGE_CHROMA_URL"
DEFAULT_PERSIST_DIR = "runs/memory"


def _default_persist_dir() -> str:
    # Read at construction so tests and deployments can point every new config elsewhere.
    return os.environ.get(ENV_MEMORY_DIR) or DEFAULT_PERSIST_DIR


@dataclass
class MemoryConfig:
    """The Generative Agents memory stream: scoring, reflection, pre-selection and storage."""

    # --- retrieval score (docs/AGENT.md §7): a_rec * recency + a_imp * importance + a_rel * relevance ---
    recency_decay: float = 0.995  # recency = decay ** (now - last_access), time in env steps
    weight_recency: float = 1.0
    weight_importance: float = 1.0
    weight_relevance: float = 1.0
    top_k: int = 5  # memories returned by a retrieval when the caller gives no k

    # --- importance (LLM-rated poignancy, 1 mundane .. 10 poignant) ---
    importance_min: float = 1.0
    importance_max: float = 10.0
    default_importance: float = 3.0  # used (and the failure recorded) when the LLM rating fails

    # --- reflection ---
    reflection_threshold: float = 150.0  # reflect when summed importance since the last one exceeds this
    reflection_recent_window: int = 100  # most recent memories shown to the question prompt
    reflection_questions: int = 3  # salient high-level questions asked per reflection
    # Memories retrieved per question and shown to the insight prompt; GA's code uses 30 nodes,
    # 12 keeps the numbered statement list readable for a small local model.
    reflection_retrieve_k: int = 12
    reflection_insights_per_question: int = 5  # GA asks for 5 insights per focal question

    # --- candidate pre-selection (exact top-k without scoring every memory; see stream.py) ---
    candidate_pool: int = 32  # first round: the top-N memories by recency+importance (numpy, cheap)
    candidate_pool_growth: int = 4  # neighbour-fetch multiplier when the exactness bound does not hold yet
    max_candidate_pool: int = 4096  # most memories taken by recency+importance before fetching more neighbours
    # Nearest neighbours fetched from Chroma in one call (more when a filter thins them out): its
    # HNSW search visits ef_search=100 nodes anyway, so 100 neighbours cost about as much as 10.
    knn_fetch: int = 100
    max_knn_fetch: int = 2000  # largest Chroma n_results before falling back to a full numpy scan
    # Stores of at most this many memories are scored exhaustively in numpy: one contiguous product
    # over ~8k unit vectors costs less than one Chroma query (~1 ms vs ~3 ms on a 2-core machine).
    exact_scan_max: int = 8192
    # list A and the recency / importance bounds from a recency order per importance value (recency_index.py) instead
    # of passes over every memory; off: always the numpy passes (the same top-k, slower on large stores)
    recency_index: bool = True
    # its limits: more distinct importance values than this and the index declines (the passes run); rows used or
    # written since the order was built are merged at query time until there are more than index_max_fresh (then
    # the order is rebuilt); a walk that would visit more than index_walk_budget rows gives up for that query
    index_max_groups: int = 16
    index_max_fresh: int = 2048
    index_walk_budget: int = 50_000
    max_recorded_candidates: int = 64  # candidates kept in a RetrievalResult (best first), bounds trace size
    # Retrievals between persisted last-access writes: a Chroma update costs ~10 ms, so they are
    # batched; pending ones are also written by add, flush(), close(), refresh() and at exit.
    access_flush_every: int = 16

    # --- embeddings ---
    embedding_threads: int = 1  # torch threads; one thread encodes ~2x faster than two on this machine
    embedding_cache_size: int = 4096  # LRU entries keyed by text
    embedding_batch_size: int = 64

    # --- storage ---
    persist_dir: str = field(default_factory=_default_persist_dir)  # env SWIFTSAGE_MEMORY_DIR overrides
    collection: str = "memory_stream"
    # a Chroma server shared by several app instances (`chroma run --host 127.0.0.1 --port 8000`), e.g.
    # "http://127.0.0.1:8000"; empty: the local directory persist_dir (env SWIFTSAGE_CHROMA_URL overrides)
    server_url: str = field(default_factory=lambda: os.environ.get(ENV_CHROMA_URL, ""))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "MemoryConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"memory config: unknown field(s) {sorted(unknown)}")
        return cls(**data)

    @property
    def weights(self) -> dict[str, float]:
        return {"recency": self.weight_recency, "importance": self.weight_importance,
                "relevance": self.weight_relevance}
