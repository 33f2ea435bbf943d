"""Retrieval scoring of the Generative Agents memory stream (docs/AGENT.md §7): pure functions.

score = w_rec * recency_n + w_imp * importance_n + w_rel * relevance_n, where each `_n` is the
raw value min-max scaled to [0, 1] over the candidates (all memories that pass the filters).

* recency = decay ** (now - last_access): the paper's definition, newest highest. (The original
  GA code ranks by list position and inverts it; we do not copy that.)
* importance = the LLM's 1..10 rating.
* relevance = cosine similarity of unit-normalized embeddings.
* A constant column (max == min) normalizes to 0.5, never NaN.

Also the JSON-safe records a retrieval returns (`ScoredCandidate`, `RetrievalResult`); traces
store `RetrievalResult.to_dict()` under a step's `retrievals`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np

SCORE_PARTS = ("recency", "importance", "relevance")
_EPS = 1e-12



def _aligned(shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    buf = np.empty(n + 16, dtype=np.float32)
    off = (-buf.ctypes.data % 64) // 4
    return buf[off: off + n].reshape(shape)


def dot_rows(rows: np.ndarray, q: np.ndarray, chunk: int = 16384) -> np.ndarray:
    """Each row's dot product with q (float64 out), the same for a row whatever rows come with it and wherever they
    lie in memory. A float32 sum's last bits depend on how it is split up: BLAS splits by the number of rows, SIMD
    by the address. So a score could change with the candidate pool, and a resumed run would not score exactly as
    the uninterrupted one. einsum sums each row on its own; copied to 64-byte-aligned memory, every row is summed
    the same way (and faster than BLAS's matrix-vector product here)."""
    qa = _aligned(np.shape(q))
    qa[...] = q
    out = np.empty(len(rows), dtype=np.float64)
    for s in range(0, len(rows), chunk):
        part = rows[s: s + chunk]
        a = _aligned(part.shape)
        a[...] = part
        out[s: s + len(part)] = np.einsum("ij,j->i", a, qa)
    return out


def recency(now: float, last_access: np.ndarray | float, decay: float) -> np.ndarray:
    """decay ** (now - last_access); time before the last access (a clock reset) counts as 0."""
    dt = np.maximum(float(now) - np.asarray(last_access, dtype=np.float64), 0.0)
    # exp(dt * ln decay) is decay ** dt, several times faster than np.power on large arrays.
    return np.exp(dt * np.log(decay))


def minmax_bounds(values: np.ndarray) -> tuple[float, float]:
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return 0.0, 0.0
    return float(v.min()), float(v.max())


def normalize(values: np.ndarray | float, lo: float, hi: float) -> np.ndarray:
    """Min-max scale with given bounds; a constant column (hi == lo) gives 0.5, never NaN."""
    v = np.asarray(values, dtype=np.float64)
    span = hi - lo
    if not np.isfinite(span) or span <= _EPS:
        return np.full(v.shape, 0.5)
    return np.clip((v - lo) / span, 0.0, 1.0)


def minmax(values: np.ndarray) -> np.ndarray:
    """Min-max scale over the values themselves (the candidates); constant -> 0.5."""
    lo, hi = minmax_bounds(values)
    return normalize(values, lo, hi)


def cosine_relevance(embeddings: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row with the query (both normalized here, so any scale works)."""
    e = np.asarray(embeddings, dtype=np.float32)
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    qn = q / max(float(np.linalg.norm(q)), _EPS)
    norms = np.linalg.norm(e, axis=1) if e.ndim == 2 and e.shape[0] else np.ones(0, np.float32)
    sims = dot_rows(e, qn)
    return sims / np.maximum(norms.astype(np.float64), _EPS)


def check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Weights must be >= 0: the exact pre-selection bound (stream.py) relies on monotone scores."""
    out = {}
    for part in SCORE_PARTS:
        w = float(weights.get(part, 1.0))
        if not np.isfinite(w) or w < 0:
            raise ValueError(f"weight for {part} must be a finite number >= 0, got {w!r}")
        out[part] = w
    return out


def combine(rec_n: np.ndarray, imp_n: np.ndarray, rel_n: np.ndarray,
            weights: Mapping[str, float]) -> np.ndarray:
    w = check_weights(weights)
    return w["recency"] * np.asarray(rec_n) + w["importance"] * np.asarray(imp_n) \
        + w["relevance"] * np.asarray(rel_n)


@dataclass
class ScoreTable:
    """Raw, normalized and final scores of a set of memories, with the bounds used."""

    recency: np.ndarray
    importance: np.ndarray
    relevance: np.ndarray
    recency_n: np.ndarray
    importance_n: np.ndarray
    relevance_n: np.ndarray
    score: np.ndarray
    bounds: dict[str, tuple[float, float]]


def score_all(now: float, last_access: np.ndarray, importance: np.ndarray, relevance: np.ndarray,
              weights: Mapping[str, float], decay: float) -> ScoreTable:
    """Exhaustive scoring: every given memory is a candidate; bounds are taken over all of them."""
    rec = recency(now, last_access, decay)
    imp = np.asarray(importance, dtype=np.float64)
    rel = np.asarray(relevance, dtype=np.float64)
    bounds = {"recency": minmax_bounds(rec), "importance": minmax_bounds(imp),
              "relevance": minmax_bounds(rel)}
    return score_with_bounds(rec, imp, rel, bounds, weights)


def score_with_bounds(rec: np.ndarray, imp: np.ndarray, rel: np.ndarray,
                      bounds: Mapping[str, tuple[float, float]],
                      weights: Mapping[str, float]) -> ScoreTable:
    rec_n = normalize(rec, *bounds["recency"])
    imp_n = normalize(imp, *bounds["importance"])
    rel_n = normalize(rel, *bounds["relevance"])
    return ScoreTable(rec, imp, rel, rec_n, imp_n, rel_n, combine(rec_n, imp_n, rel_n, weights),
                      {k: (float(v[0]), float(v[1])) for k, v in bounds.items()})


def rank(scores: np.ndarray, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Indices best first; ties go to the larger tiebreak value (the newer memory)."""
    s = np.asarray(scores, dtype=np.float64)
    tb = np.zeros_like(s) if tiebreak is None else np.asarray(tiebreak, dtype=np.float64)
    return np.lexsort((-tb, -s))


# ---------------------------------------------------------------- records

@dataclass
class ScoredCandidate:
    """One memory's full score breakdown in one retrieval."""

    id: str
    description: str
    type: str
    tag: str
    importance: float  # raw 1..10
    recency: float  # raw decay ** (now - last_access)
    relevance: float  # raw cosine similarity
    importance_n: float
    recency_n: float
    relevance_n: float
    score: float
    last_access: float  # before this retrieval updated it
    created: float
    task: str = ""
    episode: str = ""
    seq: int = 0  # insertion order; breaks score ties in favour of the newer memory
    rank: int | None = None  # 1-based in the returned top-k, None if not retrieved

    def to_dict(self) -> dict[str, Any]:
        return {k: _jsonable(v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ScoredCandidate":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class RetrievalResult:
    """A retrieval with everything needed to explain it later, JSON-safe via to_dict()."""

    query: str
    trigger: str  # "T1".."T4", "reflection", "user", ...
    now: float
    weights: dict[str, float]
    candidates: list[ScoredCandidate]  # best first, at most config.max_recorded_candidates
    top_ids: list[str]
    k: int = 5
    filters: dict[str, Any] = field(default_factory=dict)
    bounds: dict[str, list[float]] = field(default_factory=dict)  # min/max used per score part
    decay: float = 0.995
    eligible: int = 0  # memories that passed the filters (the normalization set)
    examined: int = 0  # memories actually scored (pre-selected pool or all)
    method: str = "exhaustive"  # exhaustive | preselect
    rounds: int = 0  # pre-selection rounds until the exactness bound held
    elapsed_ms: float = 0.0
    error: str | None = None  # set when the retrieval failed; then the result is empty

    def to_dict(self) -> dict[str, Any]:
        d = {k: _jsonable(v) for k, v in dataclasses.asdict(self).items() if k != "candidates"}
        d["candidates"] = [c.to_dict() for c in self.candidates]
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RetrievalResult":
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        kw["candidates"] = [ScoredCandidate.from_dict(c) for c in data.get("candidates", [])]
        kw.setdefault("weights", {p: 1.0 for p in SCORE_PARTS})
        kw.setdefault("top_ids", [])
        return cls(**kw)

    @property
    def top(self) -> list[ScoredCandidate]:
        by_id = {c.id: c for c in self.candidates}
        return [by_id[i] for i in self.top_ids if i in by_id]

    def rerank(self, weights: Mapping[str, float], k: int | None = None) -> list[ScoredCandidate]:
        """The recorded candidates re-scored with other weights (normalized values are kept)."""
        w = check_weights(weights)
        rescored = [dataclasses.replace(c, score=float(
            w["recency"] * c.recency_n + w["importance"] * c.importance_n + w["relevance"] * c.relevance_n))
            for c in self.candidates]
        order = rank(np.array([c.score for c in rescored]), np.array([c.seq for c in rescored]))
        out = [rescored[i] for i in order[: (self.k if k is None else k)]]
        for r, c in enumerate(out, 1):
            c.rank = r
        return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


def format_breakdown(candidates: Iterable[ScoredCandidate]) -> str:
    """A plain-text table of a retrieval, for logs and prompts shown to people."""
    lines = ["rank  score  rec_n  imp_n  rel_n  id        description"]
    for c in candidates:
        lines.append(f"{c.rank or '-':>4}  {c.score:5.2f}  {c.recency_n:5.2f}  {c.importance_n:5.2f}  "
                     f"{c.relevance_n:5.2f}  {c.id:<8}  {c.description[:80]}")
    return "\n".join(lines)
