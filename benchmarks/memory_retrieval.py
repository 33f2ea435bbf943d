"""Memory stream speed: write throughput, retrieval latency, and reopening, at 1k to 1M memories.

    .venv/bin/python benchmarks/memory_retrieval.py [--sizes 1000 10000 100000 1000000] [--queries 200] [--k 10]

Stores are built once and kept in --cache (default ~/.cache/swiftsage-bench/memory, outside the repository;
a 1M store takes ~4 GB and a long build); --rebuild builds them afresh. Reopening is timed in a fresh process
(Chroma keeps an opened store in memory for the life of a process): the time to open the store and answer
its first query, from the mirror's snapshot and (`--chroma-reopen`, slow at 1M) from Chroma's rows.

Bulk filler uses random clustered unit vectors instead of encoded text (encoding 100k texts on a
CPU takes ~10 minutes); real all-MiniLM-L6-v2 encoding throughput is measured separately. Each
retrieval is the agent's path: k=5, default weights, last-access updated. The batched Chroma write
that persists those updates (every 16 retrievals by default) is timed separately, so the
retrieval percentiles are not a mix of two different operations.
Not a test: run it by hand and copy the figures into docs/BENCHMARKS.md.
Reopen (snapshot): docs/BENCHMARKS.md also gives the figure without it (every row read back from Chroma).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memory_store import MemoryConfig, MemoryStream  # noqa: E402
from memory_store.embeddings import Embedder, load_model  # noqa: E402

TEXTS = [
    "Moved the metal pot to the stove in the {r}.", "The thermometer reads {n} degrees celsius.",
    "Opened the {r} door; it leads to the hallway.", "Focused on the {o}. Score went up by {n}.",
    "Tried to pick up the {o}: no known action matches that input.", "The {o} in flower pot {n} is a seedling.",
    "Connected wire {n} to the {o} terminal.", "Plan: find the {o} in the {r}, then use it on the stove.",
]
ROOMS = ["kitchen", "greenhouse", "workshop", "hallway", "art studio", "bathroom", "outside", "foundry"]
OBJECTS = ["metal fork", "orange seed", "light bulb", "battery", "ice cube", "thermometer", "glass cup", "apple"]


def fmt(xs: list[float]) -> str:
    a = np.asarray(xs)
    return f"p50 {np.percentile(a, 50):6.2f} ms  p95 {np.percentile(a, 95):6.2f} ms"


def encoding_throughput(threads: int) -> None:
    rng = np.random.default_rng(0)
    texts = [TEXTS[i % len(TEXTS)].format(r=ROOMS[rng.integers(8)], o=OBJECTS[rng.integers(8)], n=i)
             for i in range(512)]
    t0 = time.perf_counter()
    load_model(threads)
    print(f"model load: {time.perf_counter() - t0:.1f} s (torch threads = {threads})")
    emb = Embedder(threads=threads, cache_size=4096)
    t0 = time.perf_counter()
    emb.encode(texts)
    dt = time.perf_counter() - t0
    print(f"real encoding (all-MiniLM-L6-v2, batch 64): {len(texts) / dt:6.0f} texts/s")
    single = []
    for i in range(30):
        t0 = time.perf_counter()
        emb.encode_one(f"where is the {OBJECTS[i % 8]} number {i}?")
        single.append((time.perf_counter() - t0) * 1000)
    cached = []
    for i in range(30):
        t0 = time.perf_counter()
        emb.encode_one(f"where is the {OBJECTS[i % 8]} number {i}?")
        cached.append((time.perf_counter() - t0) * 1000)
    print(f"one query encode: {fmt(single)}; cached: {fmt(cached)}")


def filler(rng: np.random.Generator, n: int, start: int, centers: np.ndarray) -> tuple[list[dict], np.ndarray]:
    emb = centers[rng.integers(0, len(centers), n)] + 0.7 * rng.normal(size=(n, centers.shape[1])) / np.sqrt(
        centers.shape[1])
    types = rng.choice(["observation", "plan", "reflection"], size=n, p=[0.6, 0.2, 0.2])
    items = [dict(description=f"filler memory {start + i}", now=float(start + i), type=str(types[i]),
                  importance=int(rng.integers(1, 11)), task=f"task-{(start + i) % 30}") for i in range(n)]
    return items, emb.astype(np.float32)


REOPEN = """
import sys, time, json
t0 = time.perf_counter()
import numpy as np
from memory_store import MemoryConfig, MemoryStream
t1 = time.perf_counter()
s = MemoryStream(MemoryConfig(access_flush_every=10**9), path=sys.argv[1])
t2 = time.perf_counter()
q = np.random.default_rng(7).normal(size=384)
r = s.retrieve("", now=s.latest_time + 1, k=int(sys.argv[2]), query_embedding=q, update_access=False)
t3 = time.perf_counter()
print(json.dumps(dict(imports=t1 - t0, open=t2 - t1, first_query=t3 - t2, loaded_from=s.loaded_from, n=len(s),
                      top=r.top_ids)))
"""


def reopen(path: Path, k: int) -> dict:
    out = subprocess.run([sys.executable, "-c", REOPEN, str(path), str(k)], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent, timeout=3600)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def build(n: int, path: Path, centers: np.ndarray) -> None:
    """Fill a store with n filler memories (precomputed embeddings, bulk writes) and close it (its snapshot)."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    rng = np.random.default_rng(n)
    s = MemoryStream(MemoryConfig(), path=path)
    chunk = 5000
    t0 = time.perf_counter()
    for start in range(0, n, chunk):
        items, emb = filler(rng, min(chunk, n - start), start, centers)
        s.add_many(items, emb)
    write = time.perf_counter() - t0
    t0 = time.perf_counter()
    s.add("a single memory written the agent's way", now=float(n), importance=5, embedding=centers[0])
    single_add = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    s.close()
    snap = time.perf_counter() - t0
    (path / "built.json").write_text(json.dumps({"n": n + 1, "write_per_s": n / write}))
    print(f"built: {n / write:8.0f} memories/s (bulk add_many, precomputed embeddings); single add {single_add:.1f} ms; "
          f"snapshot written on close {snap:.1f} s")


def run_size(n: int, queries: int, k: int, cache: Path, centers: np.ndarray, rebuild: bool,
             chroma_reopen: bool) -> None:
    path = cache / f"store_{n}"
    print(f"\n== {n:,} memories == (load average {os.getloadavg()[0]:.1f})")
    if rebuild or not (path / "built.json").exists():
        build(n, path, centers)
    else:
        print(f"store cached at {path} (built at {json.loads((path / 'built.json').read_text())['write_per_s']:.0f} "
              f"memories/s)")
    r = reopen(path, k)
    print(f"reopen from the {r['loaded_from']}: open {r['open']:.2f} s + first query {r['first_query']:.2f} s = "
          f"{r['open'] + r['first_query']:.2f} s (imports {r['imports']:.1f} s, a fresh process)")
    if chroma_reopen:
        token = path / "mirror" / "token"
        saved = token.read_text() if token.exists() else None
        token.unlink(missing_ok=True)
        try:
            c = reopen(path, k)
        finally:
            if saved is not None:
                token.write_text(saved)
        assert c["top"] == r["top"], "the snapshot and Chroma's rows answer the first query differently"
        print(f"reopen from {c['loaded_from']} rows: open {c['open']:.2f} s + first query {c['first_query']:.2f} s "
              f"= {c['open'] + c['first_query']:.2f} s (same top-{k})")
    rng = np.random.default_rng(n)
    cfg = MemoryConfig(access_flush_every=10**9)  # the benchmark flushes (and times it) itself
    flush_every = MemoryConfig().access_flush_every
    s = MemoryStream(cfg, path=path)
    now = float(s.latest_time + 10)
    for label, types in (("no filter", None), ("type=observation (60%)", "observation"),
                         ("type=reflection (20%)", "reflection")):
        lat: list[float] = []
        flushes: list[float] = []
        methods: dict[str, int] = {}
        rounds: list[int] = []
        for i in range(queries + 10):
            q = centers[rng.integers(len(centers))] + 0.7 * rng.normal(size=centers.shape[1]) / np.sqrt(
                centers.shape[1])
            t0 = time.perf_counter()
            r = s.retrieve("", now=now + i, k=k, types=types, query_embedding=q)
            if i >= 10:  # warm-up excluded
                lat.append((time.perf_counter() - t0) * 1000)
                methods[r.method] = methods.get(r.method, 0) + 1
                rounds.append(r.rounds)
            if (i + 1) % flush_every == 0:
                t0 = time.perf_counter()
                s.flush()
                flushes.append((time.perf_counter() - t0) * 1000)
        now += queries + 10
        print(f"retrieve k={k} {label:<24} {fmt(lat)}  ({', '.join(f'{k} {v}' for k, v in methods.items())}; "
              f"mean rounds {np.mean(rounds):.2f}); persist last access every {flush_every}: "
              f"{np.median(flushes):.1f} ms")
    t0 = time.perf_counter()
    s.close()  # the access times changed: the next run reopens from a fresh snapshot
    print(f"close (access times + snapshot): {time.perf_counter() - t0:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "swiftsage-bench" / "memory"),
                    help="where the stores are built once and kept (outside the repository)")
    ap.add_argument("--rebuild", action="store_true", help="build the stores afresh")
    ap.add_argument("--chroma-reopen", action="store_true",
                    help="also time a reopen that reads every row from Chroma (the path without a snapshot)")
    ap.add_argument("--skip-encoding", action="store_true", help="skip the real-encoder throughput figures")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, torch threads {args.threads}, "
          f"load average {os.getloadavg()[0]:.1f} (other processes share these CPUs)")
    if not args.skip_encoding:
        encoding_throughput(args.threads)
    print("bulk filler: random clustered unit vectors (200 clusters), not encoded text")
    centers = np.random.default_rng(1).normal(size=(200, 384))
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    for n in args.sizes:
        run_size(n, args.queries, args.k, cache, centers, args.rebuild, args.chroma_reopen)


if __name__ == "__main__":
    main()
