"""What the episode benchmarks share: running jobs (task, variation) in spawned worker processes with a
progress line per episode, and the paper's macro metrics (per task, then averaged over tasks: Final with a
negative score counted as 0, success rate, Steps@Succ)."""
from __future__ import annotations

import statistics
import time
from typing import Callable


def run_pool(worker: Callable, jobs: list[tuple[str, int]], args, workers: int) -> tuple[list[dict], float]:
    """`worker(jobs, args, queue)` puts one dict per episode (or {"error": ...}) and None when done.
    Returns (results, wall minutes)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(jobs[i::workers], args, q)) for i in range(workers)]
    t0 = time.time()
    for p in procs:
        p.start()
    results, finished = [], 0
    while finished < len(procs):
        r = q.get()
        if r is None:
            finished += 1
            continue
        results.append(r)
        msg = f"ERROR {r['error']}" if "error" in r else f"final {r['raw_final']:g} in {r['steps']} steps"
        print(f"  [{len(results)}/{len(jobs)}] {r['task']} v{r['variation']}: {msg}", flush=True)
    for p in procs:
        p.join()
    return results, (time.time() - t0) / 60


def macro_scores(tasks, results: list[dict], table: bool = True) -> dict:
    """Final / success / Steps@Succ per task, then macro-averaged; prints the per-task table."""
    ok = [r for r in results if "error" not in r]
    per_task: dict[str, list[dict]] = {}
    for r in ok:
        per_task.setdefault(r["task"], []).append(r)
    if table:
        print(f"\n{'task':52s} {'final':>6s} {'succ':>5s} {'steps@succ':>10s}")
    finals, succs, steps_succ = [], [], []
    for t in tasks:
        rs = per_task.get(t.name, [])
        if not rs:
            continue
        f = statistics.mean(r["final"] for r in rs)
        s = statistics.mean(r["success"] for r in rs)
        ss = [r["steps"] for r in rs if r["success"]]
        finals.append(f)
        succs.append(s)
        if ss:
            steps_succ.append(statistics.mean(ss))
        if table:
            print(f"{t.index:2d} {t.name:49s} {f:6.1f} {s:5.0%} {statistics.mean(ss) if ss else float('nan'):10.1f}")
    return {"episodes": len(ok), "errors": len(results) - len(ok), "tasks": len(finals),
            "final_macro": statistics.mean(finals) if finals else 0.0,
            "success_macro": statistics.mean(succs) if succs else 0.0,
            "successes": sum(bool(r["success"]) for r in ok),
            "ended_at_minus_100": sum(r["raw_final"] <= -100 for r in ok),
            "steps_at_success": statistics.mean(steps_succ) if steps_succ else None}


def serve_jobs(jobs: list[tuple[str, int]], run_one: Callable[[str, int], dict], out_q) -> None:
    """A worker's loop: one result per job (an error is reported and the benchmark goes on), then None."""
    for task, var in jobs:
        try:
            out_q.put(run_one(task, var))
        except Exception as e:  # noqa: BLE001 - reported, the benchmark goes on
            out_q.put({"task": task, "variation": var, "error": f"{type(e).__name__}: {e}"})
    out_q.put(None)


def pct(xs, q: float) -> float | None:
    """The q-quantile of xs by nearest rank (None for no values): benchmark medians and p95s."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else None


def add_episode_args(ap) -> None:
    """The options every episode benchmark takes."""
    ap.add_argument("--variations", type=int, default=3, help="first N test variations of each task")
    ap.add_argument("--step-limit", type=int, default=100)
    ap.add_argument("--tasks", nargs="*", default=None)
    ap.add_argument("--workers", type=int, default=2)


def episode_jobs(args):
    """(tasks, jobs) from the parsed options: the first N test variations of each chosen task."""
    from agent_core.env import catalog

    cat = catalog()
    tasks = [cat.get(t) for t in args.tasks] if args.tasks else cat.tasks
    return tasks, [(t.name, v) for t in tasks for v in t.test[: args.variations]]
