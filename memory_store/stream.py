"""The memory stream on Chroma: add memories, retrieve them with the full score breakdown.

Storage: one Chroma `PersistentClient` collection in cosine space holds the text, the embedding
and the metadata of every memory; we always pass embeddings (Chroma's default embedding function
would try to download an ONNX model). Alongside it the stream keeps an in-process *mirror*: numpy
columns of last access, importance, type/tag/task/episode codes and the embeddings, loaded once
from the collection on open. Filtering and recency/importance pre-selection run on the mirror
(a Chroma `where` filter costs ~140 ms at 100k memories; a numpy mask costs ~0.1 ms); Chroma is
used for nearest-neighbour relevance and persistence.

Exact pre-selection (Fagin's threshold algorithm over two sorted lists). The normalization set is
every memory that passes the filters, as in exhaustive scoring. Recency and importance of all of
them come from the mirror, so their min/max and the partial score p = w_rec*rec_n + w_imp*imp_n
are exact and cheap. The relevance maximum is q's nearest neighbour and the minimum is -q's
nearest neighbour (cosine), both from Chroma. Candidates = list A (top memories by p, from numpy)
plus list B (q's nearest neighbours, from Chroma). A memory in neither list scores at most
max p outside A + w_rel * rel_n(last neighbour in B). When the k-th best candidate beats that bound,
the top k is exactly the exhaustive top k. Otherwise A takes every memory whose p could still reach
the k-th score (one numpy pass), or B fetches more neighbours; the worst case is a full numpy scan.
The only approximation left is HNSW recall on large stores; stores of up to `exact_scan_max`
memories are scored exhaustively. tests/test_memory_stream.py checks the equality on random stores.

Reopening. Reading the mirror back from Chroma costs ~15 s at 100k memories (every row's metadata
and embedding through SQLite). A local store therefore also keeps the mirror itself on disk
(`mirror/`: numpy columns and the memory objects), written when a process that changed the store
closes it, and valid only while `mirror/token` exists: every write to the collection removes the
token first, so a store changed after its snapshot (or by a process that died) is read from Chroma
as before. Chroma stays the store of record; the snapshot is a cache of what the first query needs.
"""
from __future__ import annotations

import atexit
import dataclasses
import json
import math
import os
import pickle
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlparse

import numpy as np

from memory_store import scoring
from memory_store.scoring import dot_rows
from memory_store.config import MemoryConfig
from memory_store.embeddings import EMBEDDING_DIM, Embedder, get_embedder
from memory_store.recency_index import RecencyIndex
from memory_store.scoring import RetrievalResult, ScoredCandidate

MEMORY_TYPES: tuple[str, ...] = ("observation", "reflection", "plan")
TYPE_CODE: dict[str, int] = {t: i for i, t in enumerate(MEMORY_TYPES)}
TYPE_COLORS: dict[str, str] = {"observation": "#4C78A8", "reflection": "#d4700b", "plan": "#54A24B"}
# AMM's tags (agent_core/amm/salience.py) and the tags of plans / reflections the agent stores
TAG_COLORS: dict[str, str] = {"success": "#2ca02c", "near-miss": "#b07800", "avoidance": "#d62728",
                              "plan": "#54A24B", "insight": "#d4700b"}
DEMO_FILE = Path(__file__).with_name("demo_memories.json")


@dataclass
class Memory:
    """One memory object (docs/AGENT.md §7). Times are the caller's clock (env steps by default)."""

    id: str
    description: str
    type: str  # observation | reflection | plan
    created: float
    last_access: float
    importance: float  # 1 mundane .. 10 poignant
    tag: str = ""  # AMM type tag (success / near-miss / avoidance) or any label
    task: str = ""
    episode: str = ""
    evidence_ids: list[str] = field(default_factory=list)  # reflections: the memories they cite
    depth: int = 0  # 0 for observations and plans; a reflection is 1 + the deepest evidence
    seq: int = 0  # insertion order
    created_wall: float = 0.0  # wall-clock seconds, for display only (never used in scoring)
    importance_error: str = ""  # why the default importance stands in, when rating failed
    importance_source: str = ""  # how importance was set: llm | tag-rule | default | given
    extra: dict[str, Any] = field(default_factory=dict)  # caller's scalars (AMM: variation, step, reward, ...)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Memory":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _metadata(m: Memory) -> dict[str, Any]:
    # Chroma metadata values must be scalars: the evidence list travels as JSON text.
    return {"type": m.type, "tag": m.tag, "task": m.task, "episode": m.episode,
            "importance": float(m.importance), "created": float(m.created),
            "last_access": float(m.last_access), "evidence": json.dumps(m.evidence_ids),
            "depth": int(m.depth), "seq": int(m.seq), "created_wall": float(m.created_wall),
            "importance_error": m.importance_error, "importance_source": m.importance_source,
            "extra": json.dumps(m.extra)}


def _memory_from(id_: str, doc: str | None, md: Mapping[str, Any]) -> Memory:
    return Memory(id=id_, description=doc or "", type=str(md.get("type", "observation")),
                  created=float(md.get("created", 0.0)), last_access=float(md.get("last_access", 0.0)),
                  importance=float(md.get("importance", 0.0)), tag=str(md.get("tag", "")),
                  task=str(md.get("task", "")), episode=str(md.get("episode", "")),
                  evidence_ids=list(json.loads(md.get("evidence") or "[]")),
                  depth=int(md.get("depth", 0)), seq=int(md.get("seq", 0)),
                  created_wall=float(md.get("created_wall", 0.0)),
                  importance_error=str(md.get("importance_error", "")),
                  importance_source=str(md.get("importance_source", "")),
                  extra=dict(json.loads(md.get("extra") or "{}")))


class _Codes:
    """String column stored as int codes so filters are integer compares."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.code: dict[str, int] = {}

    def get(self, name: str) -> int:
        c = self.code.get(name)
        if c is None:
            c = self.code[name] = len(self.names)
            self.names.append(name)
        return c


class _Mirror:
    """Columnar in-process copy of the collection, grown by capacity doubling."""

    def __init__(self, dim: int = EMBEDDING_DIM) -> None:
        self.dim = dim
        self.n = 0
        self.cap = 0
        self.ids: list[str] = []
        self.row: dict[str, int] = {}
        self.memories: list[Memory] = []  # the full objects, same order as the rows
        self.tags, self.tasks, self.episodes = _Codes(), _Codes(), _Codes()
        self._alloc(1024)

    COLUMNS = ("seq", "created", "last_access", "importance", "type_code", "tag_code", "task_code", "episode_code",
               "emb")

    def _alloc(self, cap: int) -> None:
        def grow(a: np.ndarray | None, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
            out = np.zeros(shape, dtype=dtype)
            if a is not None and self.n:
                out[: self.n] = a[: self.n]
            return out

        old = self.cap > 0
        self.seq = grow(self.seq if old else None, np.int64, (cap,))
        self.created = grow(self.created if old else None, np.float64, (cap,))
        self.last_access = grow(self.last_access if old else None, np.float64, (cap,))
        self.importance = grow(self.importance if old else None, np.float64, (cap,))
        self.type_code = grow(self.type_code if old else None, np.int8, (cap,))
        self.tag_code = grow(self.tag_code if old else None, np.int32, (cap,))
        self.task_code = grow(self.task_code if old else None, np.int32, (cap,))
        self.episode_code = grow(self.episode_code if old else None, np.int32, (cap,))
        self.emb = grow(self.emb if old else None, np.float32, (cap, self.dim))
        self.cap = cap

    def append(self, mems: Sequence[Memory], embs: np.ndarray) -> None:
        need = self.n + len(mems)
        if need > self.cap:
            self._alloc(max(need, 2 * self.cap))
        s = slice(self.n, need)
        self.seq[s] = [m.seq for m in mems]
        self.created[s] = [m.created for m in mems]
        self.last_access[s] = [m.last_access for m in mems]
        self.importance[s] = [m.importance for m in mems]
        self.type_code[s] = [TYPE_CODE.get(m.type, 0) for m in mems]
        self.tag_code[s] = [self.tags.get(m.tag) for m in mems]
        self.task_code[s] = [self.tasks.get(m.task) for m in mems]
        self.episode_code[s] = [self.episodes.get(m.episode) for m in mems]
        self.emb[s] = embs
        for i, m in enumerate(mems):
            self.row[m.id] = self.n + i
            self.ids.append(m.id)
            self.memories.append(m)
        self.n = need


def _flush_at_exit(ref: "weakref.ref[MemoryStream]") -> None:
    stream = ref()
    if stream is not None:
        try:
            stream.close()  # pending access times, and the snapshot if this process changed the store
        except Exception:  # interpreter shutdown: Chroma may already be gone
            pass


def _values(v: Any) -> list[str] | None:
    if v is None:
        return None
    if isinstance(v, str):
        return [v]
    return [str(x) for x in v]


class MemoryStream:
    """The Generative Agents memory stream backed by a persistent Chroma collection.

    `now` is always given by the caller (environment steps by default) and must not go backwards
    over the store's life: across episodes pass a global step counter (`latest_time` helps).
    One writer process per store directory; readers call `refresh()` to see new memories.
    """

    def __init__(self, config: MemoryConfig | None = None, path: str | os.PathLike | None = None,
                 embedder: Embedder | None = None) -> None:
        import chromadb
        from chromadb.config import Settings

        self.config = config or MemoryConfig()
        self._embedder = embedder
        self._lock = threading.RLock()
        if self.config.server_url:  # a shared Chroma server: one collection per store, no local directory
            url = urlparse(self.config.server_url if "://" in self.config.server_url
                           else f"http://{self.config.server_url}")
            self.path = f"{url.scheme}://{url.hostname}:{url.port or 8000}/{self.config.collection}"
            self._client = chromadb.HttpClient(host=url.hostname, port=url.port or 8000, ssl=url.scheme == "https",
                                               settings=Settings(anonymized_telemetry=False, allow_reset=True))
        else:
            self.path = str(Path(path if path is not None else self.config.persist_dir).resolve())
            Path(self.path).mkdir(parents=True, exist_ok=True)
            self._client = chromadb.PersistentClient(
                path=self.path, settings=Settings(anonymized_telemetry=False, allow_reset=True))
        self._collection = self._client.get_or_create_collection(
            name=self.config.collection, metadata={"hnsw:space": "cosine"}, embedding_function=None)
        self._max_batch = int(getattr(self._client, "get_max_batch_size", lambda: 5000)())
        self._pending_access: dict[str, float] = {}
        self._retrievals_since_flush = 0
        # while held, last-access updates stay in memory until `flush()`: an agent holds them during a step, so
        # a step that never reaches its trace leaves no access time behind (see rewind)
        self.hold_access = False
        self._reflection_retry_row = 0  # see mark_reflection_failed: no retry storm on a failing LLM
        self._dirty = False  # this process changed the store since its snapshot (close() then writes one)
        self._load()
        ref = weakref.ref(self)
        atexit.register(_flush_at_exit, ref)

    # ------------------------------------------------------------------ loading

    def _load(self) -> None:
        total = self._collection.count()
        self._index = RecencyIndex(self.config.index_max_groups, self.config.index_max_fresh,
                                   self.config.index_walk_budget)
        self._inexact: list[tuple[int, int]] = []  # mirror rows whose vectors may differ from Chroma's in a last bit
        snap = self._read_snapshot(total)
        if snap is not None:
            self._m, self.loaded_from = snap, "snapshot"
            return
        self.loaded_from = "chroma"
        mirror = _Mirror()
        mems: list[Memory] = []
        embs: list[np.ndarray] = []
        page = max(1, min(self._max_batch, 5000))
        for offset in range(0, total, page):
            got = self._collection.get(include=["embeddings", "metadatas", "documents"],
                                       limit=page, offset=offset)
            for i, id_ in enumerate(got["ids"]):
                mems.append(_memory_from(id_, got["documents"][i], got["metadatas"][i] or {}))
            embs.append(np.asarray(got["embeddings"], dtype=np.float32).reshape(-1, EMBEDDING_DIM))
        if mems:
            order = sorted(range(len(mems)), key=lambda i: mems[i].seq)
            allemb = np.concatenate(embs)[order]
            mirror.append([mems[i] for i in order], allemb)
        self._m = mirror

    # ------------------------------------------------------------------ the mirror's snapshot (local stores)

    SNAPSHOT_DIR = "mirror"

    def _snapshot_dir(self) -> Path | None:
        return None if self.remote else Path(self.path) / self.SNAPSHOT_DIR

    def _changed(self) -> None:
        """Called before every write to the collection: the snapshot on disk no longer describes the store."""
        self._dirty = True
        d = self._snapshot_dir()
        if d is not None:
            try:
                (d / "token").unlink()
            except FileNotFoundError:
                pass

    def _read_snapshot(self, total: int) -> "_Mirror | None":
        d = self._snapshot_dir()
        if d is None or not (d / "token").exists():
            return None
        try:
            token = (d / "token").read_text()
            with open(d / "objects.pkl", "rb") as fh:
                obj = pickle.load(fh)
            if obj.get("token") != token or obj.get("n") != total:
                return None
            cols = np.load(d / "columns.npz")
            m = _Mirror()
            n = int(obj["n"])
            m._alloc(max(1024, n))
            for name in _Mirror.COLUMNS:
                getattr(m, name)[:n] = cols[name]
            m.n = n
            m.ids = [mem.id for mem in obj["memories"]]
            m.row = {id_: i for i, id_ in enumerate(m.ids)}
            m.memories = obj["memories"]
            for attr in ("tags", "tasks", "episodes"):
                codes = getattr(m, attr)
                codes.names = list(obj[attr])
                codes.code = {name: i for i, name in enumerate(codes.names)}
            return m
        except Exception:  # noqa: BLE001 - an unreadable snapshot is only a cache: read the store itself
            return None

    def save_snapshot(self) -> bool:
        """Write the mirror next to a local store so the next open reads it instead of every Chroma row.
        Pending access times are written first (the snapshot must not be ahead of the store). True if written."""
        d = self._snapshot_dir()
        if d is None or not (Path(self.path) / "chroma.sqlite3").exists():  # remote, or the store was removed
            return False
        with self._lock:
            self.flush()
            m, n = self._m, self._m.n
            # the snapshot holds what a read of Chroma would give: bulk-written vectors are read back first
            for a, b in self._inexact:
                for s in range(a, b, self._max_batch):
                    ids = m.ids[s: min(b, s + self._max_batch)]
                    m.emb[s: s + len(ids)] = self._stored_embeddings(ids, m.emb[s: s + len(ids)])
            self._inexact = []
            d.mkdir(parents=True, exist_ok=True)
            self._changed()
            token = uuid.uuid4().hex
            np.savez(d / "columns.npz", **{name: getattr(m, name)[:n] for name in _Mirror.COLUMNS})
            with open(d / "objects.pkl", "wb") as fh:
                pickle.dump({"token": token, "n": n, "memories": m.memories[:n], "tags": m.tags.names,
                             "tasks": m.tasks.names, "episodes": m.episodes.names}, fh,
                            protocol=pickle.HIGHEST_PROTOCOL)
            (d / "token").write_text(token)  # last: a snapshot cut short has no token
            self._dirty = False
            return True

    @property
    def remote(self) -> bool:
        return bool(self.config.server_url)

    def heartbeat(self) -> None:
        """Raise if the store is gone: the local directory removed, or the Chroma server not answering."""
        if self.remote:
            self._client.heartbeat()
        elif not (Path(self.path) / "chroma.sqlite3").exists():
            raise FileNotFoundError(f"the memory store at {self.path} is gone (its directory was removed)")

    def refresh(self, force: bool = False) -> bool:
        """Reload the mirror from disk when another writer changed the store; True if reloaded. While a writer holds
        its access times (an agent mid-step, `hold_access`), nothing is written or reloaded: the held times are
        written with the step's record, or dropped with it."""
        with self._lock:
            if self.hold_access and self._pending_access:
                return False
            if force or self._collection.count() != self._m.n:
                self.flush()
                self._load()
                return True
            return False

    # ------------------------------------------------------------------ basics

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            c = self.config
            self._embedder = get_embedder(c.embedding_threads, c.embedding_cache_size, c.embedding_batch_size)
        return self._embedder

    def __len__(self) -> int:
        return self._m.n

    @property
    def latest_time(self) -> float:
        """The largest time seen (creation or access); a global clock may continue from here."""
        n = self._m.n
        if n == 0:
            return 0.0
        return float(max(self._m.created[:n].max(), self._m.last_access[:n].max()))

    def get(self, memory_id: str) -> Memory | None:
        row = self._m.row.get(memory_id)
        return None if row is None else self._snapshot(row)

    def _snapshot(self, row: int) -> Memory:
        m = self._m.memories[row]
        return dataclasses.replace(m, last_access=float(self._m.last_access[row]),
                                   evidence_ids=list(m.evidence_ids), extra=dict(m.extra))

    def memories(self) -> list[Memory]:
        """All memories, oldest first (copies: mutating them changes nothing)."""
        return [self._snapshot(i) for i in range(self._m.n)]

    def embeddings(self) -> np.ndarray:
        """(n, 384) unit vectors in the order of `memories()`."""
        return self._m.emb[: self._m.n].copy()

    def recent(self, n: int) -> list[Memory]:
        """The n most recently created memories, oldest first."""
        start = max(0, self._m.n - n)
        return [self._snapshot(i) for i in range(start, self._m.n)]

    def importance_since_last_reflection(self) -> float:
        """Summed importance of the non-reflection memories created after the newest reflection."""
        n = self._m.n
        if n == 0:
            return 0.0
        tc = self._m.type_code[:n]
        refl = np.flatnonzero(tc == TYPE_CODE["reflection"])
        start = max(int(refl[-1]) + 1 if refl.size else 0, self._reflection_retry_row)
        sel = tc[start:] != TYPE_CODE["reflection"]
        return float(self._m.importance[start:n][sel].sum())

    def mark_reflection_failed(self) -> None:
        """A reflection attempt produced nothing (LLM failure): count importance afresh from here,
        so a failing backend is not asked again on every step (in-process only)."""
        self._reflection_retry_row = self._m.n

    # ------------------------------------------------------------------ writing

    def add(self, description: str, now: float, type: str = "observation", *,
            importance: float | None = None, tag: str = "", task: str = "", episode: str | int = "",
            evidence_ids: Sequence[str] = (), depth: int | None = None,
            importance_error: str = "", importance_source: str = "", extra: Mapping[str, Any] | None = None,
            embedding: np.ndarray | None = None) -> Memory:
        """Store one memory. Give an importance rated by `rate_importance` (reflection.py); without
        one the config's default_importance is used and the reason recorded."""
        return self.add_many([dict(description=description, now=now, type=type, importance=importance,
                                   tag=tag, task=task, episode=episode, evidence_ids=list(evidence_ids),
                                   depth=depth, importance_error=importance_error,
                                   importance_source=importance_source, extra=dict(extra or {}))],
                             None if embedding is None else np.asarray(embedding)[None, :])[0]

    def add_many(self, items: Sequence[Mapping[str, Any]], embeddings: np.ndarray | None = None) -> list[Memory]:
        """Bulk add; each item has the keyword arguments of `add` (description and now required)."""
        if not items:
            return []
        c = self.config
        if embeddings is None:
            # a few at a time (the agent's writes): each encoded alone, as its queries are; bulk imports in batches
            embeddings = self.embedder.encode([str(it["description"]) for it in items], exact=len(items) <= 32)
        embeddings = np.asarray(embeddings, dtype=np.float32).reshape(len(items), -1)
        if embeddings.shape[1] != EMBEDDING_DIM:
            raise ValueError(f"embeddings must have {EMBEDDING_DIM} dimensions, got {embeddings.shape[1]}")
        # Unit vectors keep cosine == dot product in the mirror.
        embeddings = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
        with self._lock:
            next_seq = int(self._m.seq[self._m.n - 1]) + 1 if self._m.n else 0
            wall = time.time()
            mems: list[Memory] = []
            for i, it in enumerate(items):
                mtype = str(it.get("type", "observation"))
                if mtype not in TYPE_CODE:
                    raise ValueError(f"memory type must be one of {MEMORY_TYPES}, got {mtype!r}")
                imp = it.get("importance")
                err = str(it.get("importance_error") or "")
                src = str(it.get("importance_source") or ("given" if imp is not None else "default"))
                if imp is None:
                    imp, err = c.default_importance, err or "not rated: default importance used"
                imp = float(min(max(float(imp), c.importance_min), c.importance_max))
                evidence = [str(e) for e in it.get("evidence_ids") or []]
                depth = it.get("depth")
                if depth is None:
                    depth = 1 + max((self._depth_of(e) for e in evidence), default=0) if evidence else 0
                seq = next_seq + i
                now = float(it["now"])
                # last_access may be given (seeding, imports); it never precedes creation
                last = max(now, float(it.get("last_access") if it.get("last_access") is not None else now))
                mems.append(Memory(id=f"m{seq:06d}", description=str(it["description"]), type=mtype,
                                   created=now, last_access=last, importance=imp, tag=str(it.get("tag") or ""),
                                   task=str(it.get("task") or ""), episode=str(it.get("episode") or ""),
                                   evidence_ids=evidence, depth=int(depth), seq=seq, created_wall=wall,
                                   importance_error=err, importance_source=src,
                                   extra=dict(it.get("extra") or {})))
            self._changed()
            for s in range(0, len(mems), self._max_batch):
                chunk = mems[s: s + self._max_batch]
                self._collection.add(ids=[m.id for m in chunk], documents=[m.description for m in chunk],
                                     metadatas=[_metadata(m) for m in chunk],
                                     embeddings=embeddings[s: s + len(chunk)])
            if len(mems) <= 32:  # the agent's writes: the mirror holds what a reopened store will read
                embeddings = self._stored_embeddings([m.id for m in mems], embeddings)
            else:  # bulk: Chroma's copy is read back only when a snapshot must match it (save_snapshot)
                self._inexact.append((self._m.n, self._m.n + len(mems)))
            self._m.append(mems, embeddings)
            if not self.hold_access:
                self.flush()  # a write anyway: persist pending last-access updates with it
            return [dataclasses.replace(m) for m in mems]

    def _stored_embeddings(self, ids: list[str], fallback: np.ndarray) -> np.ndarray:
        """The vectors as Chroma keeps them (it may round a unit vector differently from ours in the last bit):
        a store reopened after a crash then scores exactly as the process that wrote it."""
        got = self._collection.get(ids=ids, include=["embeddings"])
        by_id = dict(zip(got["ids"], got["embeddings"]))
        if any(i not in by_id for i in ids):
            return fallback
        return np.asarray([by_id[i] for i in ids], dtype=np.float32).reshape(len(ids), -1)

    def _depth_of(self, memory_id: str) -> int:
        row = self._m.row.get(memory_id)
        return 0 if row is None else self._m.memories[row].depth

    def flush(self) -> None:
        """Persist pending last-access updates (batched `update`)."""
        with self._lock:
            if not self._pending_access:
                return
            ids = list(self._pending_access)
            self._changed()
            for s in range(0, len(ids), self._max_batch):
                chunk = ids[s: s + self._max_batch]
                self._collection.update(ids=chunk, metadatas=[{"last_access": self._pending_access[i]}
                                                               for i in chunk])
            self._pending_access.clear()
            self._retrievals_since_flush = 0

    def close(self) -> None:
        """Write pending access times, and the mirror's snapshot when this process changed a local store."""
        self.flush()
        if self._dirty:
            self.save_snapshot()

    def release(self) -> None:
        """Close, then free the Chroma client of a local store (its system, index and sqlite handles) for this
        process. The stream must not be used afterwards."""
        with self._lock:
            self.close()
            if self.remote:
                return
            from chromadb.api.shared_system_client import SharedSystemClient

            ident = getattr(self._client, "_identifier", None)
            system = SharedSystemClient._identifier_to_system.pop(ident, None)  # noqa: SLF001 - pinned chromadb
            if system is not None:
                system.stop()

    def delete(self, ids: Sequence[str]) -> int:
        """Remove these memories (unknown ids are ignored); returns how many were removed. Ids are positional
        (`m{seq}`), so removing the newest ones lets the next write take the first removed id again."""
        with self._lock:
            known = [i for i in ids if i in self._m.row]
            if not known:
                return 0
            self.flush()
            self._changed()
            for s in range(0, len(known), self._max_batch):
                self._collection.delete(ids=known[s: s + self._max_batch])
            self._load()
            return len(known)

    def discard_unflushed(self) -> None:
        """Forget what this process changed but has not written (held access times): the store is read back from
        disk. A writer that failed half way (an agent's step that never reached its trace) leaves no trace here."""
        with self._lock:
            self._pending_access.clear()
            self._retrievals_since_flush = 0
            self._load()

    def set_access(self, values: Mapping[str, float]) -> None:
        """Set last-access times exactly (restoring a store to an earlier point; a retrieval only moves them
        forward). Unknown ids are ignored; written at once."""
        with self._lock:
            for id_, t in values.items():
                row = self._m.row.get(id_)
                if row is not None:
                    self._m.last_access[row] = float(t)
                    self._pending_access[id_] = float(t)
            self._index.set_back()  # an access time may have moved back: the recency order is rebuilt
            self.flush()

    def reset(self) -> None:
        """Delete every memory (the collection is recreated empty)."""
        with self._lock:
            self._pending_access.clear()
            self._changed()
            self._client.delete_collection(self.config.collection)
            self._collection = self._client.get_or_create_collection(
                name=self.config.collection, metadata={"hnsw:space": "cosine"}, embedding_function=None)
            self._load()

    # ------------------------------------------------------------------ retrieval

    def _eligible(self, types: Any, tags: Any, tasks: Any, episodes: Any,
                  exclude_ids: Iterable[str] | None, exclude_episodes: Any = None) -> np.ndarray | None:
        """Boolean mask over rows, or None when nothing is filtered."""
        n = self._m.n
        mask: np.ndarray | None = None

        def narrow(col: np.ndarray, codes: list[int]) -> None:
            nonlocal mask
            # A lookup table indexed by code: ~10x faster than np.isin on 100k rows.
            lut = np.zeros(max([int(col[:n].max(initial=0)), *codes]) + 2, dtype=bool)
            lut[[cd for cd in codes if cd >= 0]] = True
            sel = lut[col[:n]]
            mask = sel if mask is None else mask & sel

        if (tv := _values(types)) is not None:
            unknown = set(tv) - set(TYPE_CODE)
            if unknown:
                raise ValueError(f"unknown memory type(s) {sorted(unknown)}")
            narrow(self._m.type_code, [TYPE_CODE[t] for t in tv])
        for values, col, codes in ((tags, self._m.tag_code, self._m.tags),
                                   (tasks, self._m.task_code, self._m.tasks),
                                   (episodes, self._m.episode_code, self._m.episodes)):
            if (vv := _values(values)) is not None:
                narrow(col, [codes.code[v] for v in vv if v in codes.code] or [-1])
        if (xv := _values(exclude_episodes)) is not None:
            codes = [self._m.episodes.code[v] for v in xv if v in self._m.episodes.code]
            if codes:
                lut = np.zeros(max([int(self._m.episode_code[:n].max(initial=0)), *codes]) + 2, dtype=bool)
                lut[codes] = True
                keep = ~lut[self._m.episode_code[:n]]
                mask = keep if mask is None else mask & keep
        if exclude_ids:
            rows = [self._m.row[i] for i in exclude_ids if i in self._m.row]
            if rows:
                mask = np.ones(n, dtype=bool) if mask is None else mask.copy()
                mask[rows] = False
        return mask

    def retrieve(self, query: str, now: float, k: int | None = None, *, trigger: str = "user",
                 types: str | Sequence[str] | None = None, tags: str | Sequence[str] | None = None,
                 task: str | Sequence[str] | None = None, episode: str | Sequence[str] | None = None,
                 weights: Mapping[str, float] | None = None, update_access: bool = True,
                 query_embedding: np.ndarray | None = None,
                 exclude_ids: Iterable[str] | None = None, exhaustive: bool = False,
                 exclude_episode: str | Sequence[str] | None = None) -> RetrievalResult:
        """Top-k memories by recency + importance + relevance with every candidate's breakdown.

        Filters (types, tags, task, episode; exclude_episode: none of these episodes') restrict the candidates and
        so the normalization set.
        `exhaustive=True` scores every eligible memory (the reference the pre-selection equals).
        """
        t0 = time.perf_counter()
        c = self.config
        k = c.top_k if k is None else int(k)
        w = scoring.check_weights(weights if weights is not None else c.weights)
        filters = {key: v for key, v in (("types", _values(types)), ("tags", _values(tags)),
                                         ("task", _values(task)), ("episode", _values(episode)),
                                         ("exclude_episode", _values(exclude_episode)))
                   if v is not None}
        result = RetrievalResult(query=query, trigger=trigger, now=float(now), weights=w, candidates=[],
                                 top_ids=[], k=k, filters=filters, decay=c.recency_decay)
        q = (self.embedder.encode_one(query) if query_embedding is None
             else np.asarray(query_embedding, dtype=np.float32).reshape(-1))
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        with self._lock:
            n = self._m.n
            mask = self._eligible(types, tags, task, episode, exclude_ids, exclude_episode) if n else None
            n_e = n if mask is None else int(np.count_nonzero(mask))
            result.eligible = n_e
            if n_e == 0 or k <= 0:
                result.elapsed_ms = (time.perf_counter() - t0) * 1000
                return result
            m = self._m
            found = None
            if not exhaustive and n > c.exact_scan_max and c.recency_index:
                found = self._preselect_indexed(q, float(now), w, k, mask, n_e)
            if found is not None:
                sel, table, rounds = found
                result.method = "indexed"
            else:
                rows = np.arange(n) if mask is None else np.flatnonzero(mask)
                rec = scoring.recency(now, m.last_access[:n] if mask is None else m.last_access[rows],
                                      c.recency_decay)
                imp = m.importance[:n] if mask is None else m.importance[rows]
                bounds = {"recency": scoring.minmax_bounds(rec), "importance": scoring.minmax_bounds(imp)}
                if exhaustive or n <= c.exact_scan_max:
                    sel, table, rounds = self._scan(rows, rec, imp, q, bounds, w, mask is None)
                    result.method = "exhaustive"
                else:
                    sel, table, rounds = self._preselect(rows, rec, imp, q, bounds, w, k, mask)
                    result.method = "preselect" if table is not None else "exhaustive"
                    if table is None:  # the bound never held cheaply: fall back to the full scan
                        sel, table, rounds2 = self._scan(rows, rec, imp, q, bounds, w, mask is None)
                        rounds += rounds2
            result.rounds = rounds
            result.examined = int(sel.size)
            result.bounds = {kk: [float(a), float(b)] for kk, (a, b) in table.bounds.items()}
            order = scoring.rank(table.score, m.seq[sel])
            keep = order[: max(k, min(c.max_recorded_candidates, order.size))]
            top_rows = sel[order[:k]]
            for r, j in enumerate(keep, 1):
                row = int(sel[j])
                mem = m.memories[row]
                result.candidates.append(ScoredCandidate(
                    id=mem.id, description=mem.description, type=mem.type, tag=mem.tag,
                    importance=float(table.importance[j]), recency=float(table.recency[j]),
                    relevance=float(table.relevance[j]), importance_n=float(table.importance_n[j]),
                    recency_n=float(table.recency_n[j]), relevance_n=float(table.relevance_n[j]),
                    score=float(table.score[j]), last_access=float(m.last_access[row]),
                    created=mem.created, task=mem.task, episode=mem.episode, seq=mem.seq,
                    rank=r if r <= k else None))
            result.top_ids = [m.ids[int(r)] for r in top_rows]
            if update_access:
                self._touch(top_rows, float(now))
        result.elapsed_ms = (time.perf_counter() - t0) * 1000
        return result

    def _touch(self, rows: np.ndarray, now: float) -> None:
        m = self._m
        m.last_access[rows] = np.maximum(m.last_access[rows], now)
        self._index.changed(rows)
        for r in rows:
            self._pending_access[m.ids[int(r)]] = float(m.last_access[r])
        self._retrievals_since_flush += 1
        if self._retrievals_since_flush >= max(1, self.config.access_flush_every) and not self.hold_access:
            self.flush()

    def _relevance(self, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        # Stored rows are unit vectors, so cosine is a dot product; float64 after the product. einsum, not `@`: BLAS
        # sums a row differently depending on how many rows go with it, so a score would change in its last bits
        # with the candidate pool (a resumed run must score exactly as the uninterrupted one)
        return dot_rows(self._m.emb[rows], q)

    def _scan(self, rows: np.ndarray, rec: np.ndarray, imp: np.ndarray, q: np.ndarray,
              bounds: dict[str, tuple[float, float]], w: dict[str, float], all_rows: bool
              ) -> tuple[np.ndarray, scoring.ScoreTable, int]:
        # One contiguous matrix-vector product over every row, then pick the eligible ones: gathering
        # rows first costs ~1 us per row here, 10x the product itself.
        rel = dot_rows(self._m.emb[: self._m.n], q)
        if not all_rows:
            rel = rel[rows]
        b = dict(bounds, relevance=scoring.minmax_bounds(rel))
        return rows, scoring.score_with_bounds(rec, imp, rel, b, w), 1

    def _knn(self, q: np.ndarray, n_fetch: int, mask: np.ndarray | None) -> tuple[list[int], bool]:
        """Rows of q's nearest neighbours that pass the mask, nearest first, and whether the whole
        collection came back (then the list holds every eligible row)."""
        total = self._m.n
        n_fetch = min(n_fetch, total)
        got = self._collection.query(query_embeddings=[q.tolist()], n_results=n_fetch, include=["distances"])
        row = self._m.row
        rows = [row[i] for i in got["ids"][0] if i in row]
        return (rows if mask is None else [r for r in rows if mask[r]]), n_fetch >= total

    def _first_fetch(self, total: int, n_e: int, k: int) -> tuple[int, int]:
        """The first round's neighbour counts: -q's (its nearest is the least relevant eligible memory, the
        relevance minimum) and q's (list B). A filter keeps ~1/thin of any neighbour list."""
        c = self.config
        thin = total / n_e
        return (max(10, int(math.ceil(4 * thin))),
                max(c.knn_fetch, int(math.ceil(max(c.candidate_pool, k) * thin * 1.25))))

    def _preselect_indexed(self, q: np.ndarray, now: float, w: dict[str, float], k: int, mask: np.ndarray | None,
                           n_e: int) -> tuple[np.ndarray, scoring.ScoreTable, int] | None:
        """The threshold algorithm's first round with list A and the recency / importance bounds from the recency
        index (recency_index.py) instead of passes over every memory. None when the index declines or the bound does
        not hold in one round: the caller then runs `_preselect` (which can widen A and B)."""
        c, m = self.config, self._m
        n = m.n
        heads = self._index.heads(m.last_access[:n], m.importance[:n], m.seq[:n], mask, max(c.candidate_pool, k))
        if heads is None:
            return None
        decay = c.recency_decay
        r_lo, r_hi = (float(x) for x in scoring.recency(now, np.array([heads.la_min, heads.la_max]), decay))
        bounds = {"recency": (r_lo, r_hi), "importance": (heads.imp_min, heads.imp_max)}

        def partial(rows: np.ndarray) -> np.ndarray:
            return (w["recency"] * scoring.normalize(scoring.recency(now, m.last_access[rows], decay), r_lo, r_hi)
                    + w["importance"] * scoring.normalize(m.importance[rows], heads.imp_min, heads.imp_max))

        unseen_p = float(partial(heads.next_rows).max()) if heads.next_rows.size else -math.inf
        n_low, n_fetch = self._first_fetch(n, n_e, k)
        if n_low > c.max_knn_fetch and n_low < n:
            return None
        low_rows, _ = self._knn(-q, n_low, mask)
        if not low_rows or (n_fetch > c.max_knn_fetch and n_fetch < n):
            return None
        knn_rows, complete = self._knn(q, n_fetch, mask)
        if not knn_rows:
            return None
        sel = np.union1d(heads.rows, np.asarray(knn_rows, dtype=np.int64))
        rel = self._relevance(sel, q)
        ends = self._relevance(np.asarray([knn_rows[0], knn_rows[-1], low_rows[0]]), q)
        lo, hi = min(float(rel.min()), float(ends[2])), max(float(rel.max()), float(ends[0]))
        table = scoring.score_with_bounds(scoring.recency(now, m.last_access[sel], decay), m.importance[sel], rel,
                                          dict(bounds, relevance=(lo, hi)), w)
        if sel.size >= n_e or complete:
            return sel, table, 1
        rel_part = w["relevance"] * float(scoring.normalize(ends[1], lo, hi))
        kth = float(np.partition(table.score, sel.size - k)[sel.size - k]) if sel.size >= k else -math.inf
        if kth > unseen_p + rel_part + 1e-9:
            return sel, table, 1
        return None

    def _preselect(self, rows: np.ndarray, rec: np.ndarray, imp: np.ndarray, q: np.ndarray,
                   bounds: dict[str, tuple[float, float]], w: dict[str, float], k: int,
                   mask: np.ndarray | None) -> tuple[np.ndarray, scoring.ScoreTable | None, int]:
        """Threshold-algorithm pre-selection (module doc). Returns (rows scored, their scores, rounds),
        or a None table when the bound would need more than `max_knn_fetch` neighbours."""
        c = self.config
        n_e, total = rows.size, self._m.n
        grow = max(2, c.candidate_pool_growth)
        partial = (w["recency"] * scoring.normalize(rec, *bounds["recency"])
                   + w["importance"] * scoring.normalize(imp, *bounds["importance"]))
        n_low, n_fetch = self._first_fetch(total, n_e, k)
        while True:
            if n_low > c.max_knn_fetch and n_low < total:
                return rows, None, 0
            low_rows, _ = self._knn(-q, n_low, mask)
            if low_rows:
                break
            n_low *= grow
        # List A: the best memories by the partial score p. `unseen_p` bounds p outside A.
        pool_a = min(max(c.candidate_pool, k), n_e)
        a_local = np.argpartition(-partial, pool_a - 1)[:pool_a] if pool_a < n_e else np.arange(n_e)
        unseen_p = float(partial[a_local].min()) if pool_a < n_e else -math.inf
        rounds = 0
        knn_rows: list[int] | None = None
        rel_seen = np.full(n_e, np.nan)
        while True:
            rounds += 1
            if knn_rows is None:  # list B: the nearest neighbours by relevance
                if n_fetch > c.max_knn_fetch and n_fetch < total:
                    return rows, None, rounds
                knn_rows, complete = self._knn(q, n_fetch, mask)
                if not knn_rows:  # the filter left no neighbour: fetch more
                    n_fetch *= grow
                    knn_rows = None
                    continue
                b_local = (np.searchsorted(rows, knn_rows) if mask is not None
                           else np.asarray(knn_rows, dtype=np.int64))
                ends = self._relevance(np.asarray([knn_rows[0], knn_rows[-1], low_rows[0]]), q)
            sel_local = np.union1d(a_local, b_local)
            sel = rows[sel_local]
            # Relevance of rows seen in earlier rounds is kept: gathering embedding rows dominates.
            todo = sel_local[np.isnan(rel_seen[sel_local])]
            if todo.size:
                rel_seen[todo] = self._relevance(rows[todo], q)
            rel = rel_seen[sel_local]
            lo, hi = min(float(rel.min()), float(ends[2])), max(float(rel.max()), float(ends[0]))
            table = scoring.score_with_bounds(rec[sel_local], imp[sel_local], rel,
                                              dict(bounds, relevance=(lo, hi)), w)
            if sel_local.size >= n_e or complete:
                return sel, table, rounds  # every eligible memory is among the candidates
            # A memory in neither list scores at most unseen_p + w_rel * rel_n(last neighbour).
            rel_part = w["relevance"] * float(scoring.normalize(ends[1], lo, hi))
            kth = (float(np.partition(table.score, sel_local.size - k)[sel_local.size - k])
                   if sel_local.size >= k else -math.inf)
            if kth > unseen_p + rel_part + 1e-9:
                return sel, table, rounds
            if kth > rel_part:
                # Take into A every memory whose p could still reach the k-th score; then any
                # memory left out scores below it. Cheap (numpy) unless that set is huge.
                thr = kth - rel_part - 1e-9
                wanted = partial >= thr
                if int(wanted.sum()) <= c.max_candidate_pool:
                    a_local = np.flatnonzero(wanted)
                    unseen_p = float(np.max(partial, where=~wanted, initial=-math.inf))
                    continue
            n_fetch *= grow  # only more neighbours can close the gap
            knn_rows = None


# ---------------------------------------------------------------------- demo store

def load_demo_items(path: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """The demo memories (three ScienceWorld episodes), in creation order, with fixed importances."""
    data = json.loads(Path(path or DEMO_FILE).read_text())
    items = data["memories"] if isinstance(data, dict) else data
    return sorted(items, key=lambda it: float(it["created"]))


def seed_demo(stream: MemoryStream, path: str | os.PathLike | None = None) -> list[Memory]:
    """Fill a store with the demo memories (no LLM needed); evidence keys become memory ids."""
    items = load_demo_items(path)
    key_to_id: dict[str, str] = {}
    added: list[Memory] = []
    # One add per dependency level keeps evidence ids resolvable while still batching the encodes.
    pending = list(items)
    while pending:
        ready = [it for it in pending if all(e in key_to_id for e in it.get("evidence", []))]
        if not ready:
            raise ValueError("demo memories cite unknown or circular evidence keys")
        batch = [dict(description=it["description"], now=it["created"], type=it.get("type", "observation"),
                      importance=it["importance"], tag=it.get("tag", ""), task=it.get("task", ""),
                      episode=it.get("episode", ""), last_access=it.get("last_access"),
                      evidence_ids=[key_to_id[e] for e in it.get("evidence", [])]) for it in ready]
        for it, mem in zip(ready, stream.add_many(batch)):
            key_to_id[it["key"]] = mem.id
            added.append(mem)
        pending = [it for it in pending if it["key"] not in key_to_id]
    return added
