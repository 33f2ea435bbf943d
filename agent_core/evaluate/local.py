"""Local worker processes (the default backend): each spawned process owns one JVM, one Swift and one LLM
backend and pulls episodes from a shared queue, so a long episode never holds up the others."""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
from pathlib import Path
from typing import Any, Callable

from .spec import EvalSpec, Job


def _exit_with_parent(parent: int) -> None:
    """A worker whose evaluation process is gone (killed, or closed with its terminal) stops at once, its JVM with
    it: otherwise it would go on playing episodes nobody collects, on cores someone else needs. Seen: workers of a
    killed evaluation still running an hour later."""
    import threading
    import time

    def watch() -> None:
        while True:
            time.sleep(2.0)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _worker(spec_json: dict[str, Any], out: str, keep_stores: bool, threads: int, jobs, results,
            parent: int | None = None) -> None:
    import torch

    from .runner import EpisodeRunner, error_row
    from .spec import EvalSpec, Job

    if parent is not None:
        _exit_with_parent(parent)
    torch.set_num_threads(threads)
    os.environ["SWIFT_THREADS"] = str(threads)  # Swift's cap: this worker's share of the cores
    runner = EpisodeRunner(EvalSpec.from_json(spec_json), out, keep_stores)
    try:
        while True:
            item = jobs.get()
            if item is None:
                break
            job = Job(*item)
            try:
                results.put(("row", runner.run(job)))
            except Exception as e:  # noqa: BLE001 - e.g. the Swift model failed to load: say so, go on
                results.put(("row", error_row(job, f"{type(e).__name__}: {e}")))
    finally:
        runner.close()
        results.put(("exit", None))


def run_local(spec: EvalSpec, out: Path, jobs: list[Job], workers: int, on_row: Callable[[dict], None],
              keep_stores: bool = False, threads: int | None = None) -> None:
    """Play `jobs` in `workers` spawned processes; `on_row` gets each episode's metrics row as it finishes."""
    if not jobs:
        return
    workers = max(1, min(workers, len(jobs)))
    threads = threads or max(1, (os.cpu_count() or 1) // workers)
    ctx = mp.get_context("spawn")
    jq, rq = ctx.Queue(), ctx.Queue()
    for j in jobs:
        jq.put((j.preset, j.task, j.variation))
    for _ in range(workers):
        jq.put(None)
    procs = [ctx.Process(target=_worker, args=(spec.to_json(), str(out), keep_stores, threads, jq, rq, os.getpid()),
                         daemon=True) for _ in range(workers)]
    for p in procs:
        p.start()
    exited = 0
    try:
        while exited < workers:
            try:
                kind, row = rq.get(timeout=2.0)
            except queue.Empty:
                if not any(p.is_alive() for p in procs):  # every worker died without saying goodbye
                    codes = [p.exitcode for p in procs]
                    raise RuntimeError(f"all {workers} worker processes died (exit codes {codes}); finished "
                                       f"episodes are kept, rerun the same command to resume") from None
                continue
            if kind == "exit":
                exited += 1
            else:
                on_row(row)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
