"""Where the agent's episodic memory lives, and the shipped warm store.

The shipped warm store is an export (`assets/memory/warm_store.jsonl.gz`: one memory per line with its
float16 embedding, plus `MANIFEST.json`), built by `python -m agent_core.warmup`. It is never opened for
writing: it is materialized once into a seed directory under the runs folder, and every store the agent
writes is a copy of that seed (or an empty store for the weak-memory variant). So evaluation episodes
each get a fresh copy and are repeatable, while live runs in the app keep writing one store that the
Memory explorer opens.
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import shutil
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from memory_store import MemoryConfig, MemoryStream, open_stream
from memory_store.stream import Memory

ROOT = Path(__file__).resolve().parents[2]
WARM_DIR = ROOT / "assets" / "memory"
WARM_EXPORT = WARM_DIR / "warm_store.jsonl.gz"
WARM_MANIFEST = WARM_DIR / "MANIFEST.json"
_seed_lock = threading.Lock()


class StoreUnavailable(RuntimeError):
    """The memory store cannot be used (removed, unreadable, no shipped warm store)."""


def export_store(stream: MemoryStream, path: str | Path, keep: set[str] | None = None) -> int:
    """Write every memory (oldest first; only ids in `keep` when given) with its embedding (float16, base64)
    as gzipped JSON Lines. Ids are renumbered in order on import, so a filtered export stays consistent."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mems, embs = stream.memories(), stream.embeddings()
    tmp = path.with_suffix(path.suffix + ".tmp")
    # mtime=0: the same store exports to the same bytes (a rebuild that changes nothing shows no diff)
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:
        n = 0
        for m, e in zip(mems, embs):
            if keep is not None and m.id not in keep:
                continue
            n += 1
            d = m.to_dict()
            d.pop("created_wall", None)
            d["embedding_f16"] = base64.b64encode(np.asarray(e, dtype=np.float16).tobytes()).decode()
            fh.write((json.dumps(d, sort_keys=True) + "\n").encode())
    tmp.replace(path)
    return n


def read_export(path: str | Path) -> Iterator[tuple[Memory, np.ndarray]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                emb = np.frombuffer(base64.b64decode(d.pop("embedding_f16")), dtype=np.float16).astype(np.float32)
            except (ValueError, KeyError) as e:
                raise StoreUnavailable(f"{path}:{no}: not a memory export line ({e})") from e
            yield Memory.from_dict(d), emb


def import_export(stream: MemoryStream, path: str | Path) -> int:
    """Add an export's memories to an empty store, keeping ids, times, importance and tags."""
    if len(stream):
        raise ValueError(f"import into an empty store only ({stream.path} holds {len(stream)} memories)")
    items, embs = [], []
    new_id: dict[str, str] = {}  # an empty store numbers memories m000000, m000001, ... in insertion order
    for m, e in read_export(path):
        new_id[m.id] = f"m{len(items):06d}"
        items.append(dict(description=m.description, now=m.created, last_access=m.last_access, type=m.type,
                          importance=m.importance, importance_error=m.importance_error,
                          importance_source=m.importance_source, tag=m.tag, task=m.task, episode=m.episode,
                          evidence_ids=[new_id[x] for x in m.evidence_ids if x in new_id], depth=m.depth,
                          extra=m.extra))
        embs.append(e)
    if items:
        stream.add_many(items, np.stack(embs))
    return len(items)


def warm_manifest() -> dict[str, Any]:
    try:
        return json.loads(WARM_MANIFEST.read_text())
    except (OSError, ValueError):
        return {}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def seed_dir(parent: Path, warm: bool) -> Path:
    """The materialized seed beside the stores copied from it (read by copying only): the shipped warm
    store, or an empty store."""
    if not warm:
        return parent / ".seed-empty"
    if not WARM_EXPORT.exists():
        raise StoreUnavailable(f"no shipped warm store at {WARM_EXPORT}: build it with `python -m agent_core.warmup`"
                               f" or run with amm.warmup=false")
    return parent / f".seed-warm-{_sha(WARM_EXPORT)}"


def _materialize(seed: Path, warm: bool, config: MemoryConfig) -> None:
    with _seed_lock:
        if (seed / "SEEDED").exists():
            return
        shutil.rmtree(seed, ignore_errors=True)  # a half-built seed from an interrupted process
        stream = MemoryStream(_cfg(config, seed), path=seed)
        n = import_export(stream, WARM_EXPORT) if warm else 0
        stream.close()
        # the marker comes last: a seed without it is rebuilt
        (seed / "SEEDED").write_text(json.dumps({"memories": n, "from": str(WARM_EXPORT) if warm else "empty"}))


def _cfg(config: MemoryConfig, path: Path) -> MemoryConfig:
    import dataclasses

    return dataclasses.replace(config, persist_dir=str(path))


def prepare_store(dest: str | Path, warm: bool, config: MemoryConfig) -> tuple[Path, str]:
    """Make sure `dest` holds a store; a new one starts as a copy of the seed (kept in dest's parent folder).
    Returns (path, what it started from: 'existing store' / 'copy of the shipped warm store' / 'empty')."""
    dest = Path(dest).resolve()
    if (dest / "chroma.sqlite3").exists():
        return dest, "existing store"
    seed = seed_dir(dest.parent, warm)
    _materialize(seed, warm, config)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(seed, dest, dirs_exist_ok=True)
    (dest / "SEEDED").unlink(missing_ok=True)
    return dest, "copy of the shipped warm store" if warm else "empty"


def open_agent_store(dest: str | Path, config: MemoryConfig) -> MemoryStream:
    return open_stream(_cfg(config, Path(dest)), path=str(dest))


def open_server_store(name: str, warm: bool, config: MemoryConfig) -> tuple[MemoryStream, str]:
    """The store `name` as a collection on the Chroma server at config.server_url (several app instances share
    it); a new, empty one is filled from the shipped warm store when `warm`. Returns (stream, what it started
    from)."""
    import dataclasses

    cfg = dataclasses.replace(config, collection=f"amm-{name}"[:63])
    stream = open_stream(cfg)
    if len(stream) == 0 and warm:
        with _seed_lock:
            stream.refresh()
            if len(stream) == 0:
                n = import_export(stream, WARM_EXPORT)
                return stream, f"the shipped warm store ({n} memories), copied into the server's collection"
    return stream, "existing collection on the server" if len(stream) else "empty"
