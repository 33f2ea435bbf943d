"""Swift alone vs Swift + Gate-1 + the stagnation detector (SRM without its Critic), no LLM anywhere.

    .venv/bin/python benchmarks/srm_swift.py --variant swift --workers 2        # Swift alone, no loop guard
    .venv/bin/python benchmarks/srm_swift.py --variant swift-loop-guard          # Swift alone + its loop guard
    .venv/bin/python benchmarks/srm_swift.py --variant swift-srm --workers 2    # + Gate-1, stagnation, loop guard

Both run the agent's own loop (agent_core.controller.Agent) with Sage switched off
(`controller.sage_enabled=false`), on the first 3 test variations of every task (90 episodes, 100 steps).
In `swift-srm`, Gate-1 checks every Swift candidate (focus limit, focus target visible, no-ops, the
stagnation report's actions to avoid) and the next-ranked admissible candidate is taken when one is
dropped; the stagnation detector's reports bind Swift for `srm.gate1_avoid_steps` steps. The Critic is off
(`srm.critic_enabled=false`): it needs an LLM. Prints Final, successes, episodes ending at -100, Gate-1
decisions by reason (the paper's Table 6 shape) and reports by mode; writes benchmarks/results/<variant>.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.env import catalog  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {
    "swift": {"controller.sage_enabled": False},
    # Swift alone with its loop guard (the guard is part of SRM in the agent; here on its own)
    "swift-loop-guard": {"controller.sage_enabled": False},
    "swift-srm": {"controller.sage_enabled": False, "srm.enabled": True, "srm.critic_enabled": False},
}


def run_episode(agent, task: str, variation: int) -> dict:
    agent.start(task, variation, split="test")
    gate, modes, lat = Counter(), Counter(), []
    while not agent.done:
        rec = agent.step()
        lat.append(rec.timings.get("swift", 0.0))
        for d in rec.gate1:
            gate[f"{d.decision}:{d.reason}"] += 1
        if rec.stagnation:
            modes.update(rec.stagnation.modes)
    s = agent.finish()
    return {"task": task, "variation": variation, "final": max(0.0, s.final_score), "raw_final": s.final_score,
            "success": s.success, "steps": s.steps, "gate1": dict(gate), "reports": dict(modes),
            "menus": sum(1 for r in agent.records if r.menu), "latencies": lat,
            "actions": [r.action for r in agent.records]}


def worker(jobs: list[tuple[str, int]], args, out_q) -> None:
    import torch

    from agent_core.config import apply_overrides, preset
    from agent_core.controller import Agent, load_swift
    from agent_core.llm import ScriptedBackend

    torch.set_num_threads(1)
    cfg = apply_overrides(preset("baseline"), {**VARIANTS[args.variant], "env.step_limit": args.step_limit})
    cfg.preset = args.variant
    swift = load_swift(cfg)
    swift.loop_guard = args.variant == "swift-loop-guard"
    runs = Path(tempfile.mkdtemp(prefix="srm_swift_"))
    agent = Agent(cfg, swift, ScriptedBackend([]), runs_dir=runs)  # no LLM: any call would fail loudly
    for task, var in jobs:
        try:
            out_q.put(run_episode(agent, task, var))
        except Exception as e:  # noqa: BLE001 - reported, the benchmark goes on
            out_q.put({"task": task, "variation": var, "error": f"{type(e).__name__}: {e}"})
    agent.close()
    out_q.put(None)


def main() -> None:
    import multiprocessing as mp

    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=list(VARIANTS), required=True)
    ap.add_argument("--variations", type=int, default=3, help="first N test variations of each task")
    ap.add_argument("--step-limit", type=int, default=100)
    ap.add_argument("--tasks", nargs="*", default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    cat = catalog()
    tasks = [cat.get(t) for t in args.tasks] if args.tasks else cat.tasks
    jobs = [(t.name, v) for t in tasks for v in t.test[: args.variations]]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(jobs[i::args.workers], args, q)) for i in range(args.workers)]
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
    ok = [r for r in results if "error" not in r]
    per_task: dict[str, list[dict]] = {}
    for r in ok:
        per_task.setdefault(r["task"], []).append(r)
    finals, succs, steps_succ = [], [], []
    for t in tasks:
        rs = per_task.get(t.name, [])
        if not rs:
            continue
        finals.append(statistics.mean(r["final"] for r in rs))
        succs.append(statistics.mean(r["success"] for r in rs))
        ss = [r["steps"] for r in rs if r["success"]]
        if ss:
            steps_succ.append(statistics.mean(ss))
    gate = Counter()
    reports = Counter()
    for r in ok:
        gate.update(r["gate1"])
        reports.update(r["reports"])
    lat = sorted(x for r in ok for x in r["latencies"] if x)
    summary = {
        "variant": args.variant, "overrides": VARIANTS[args.variant], "episodes": len(ok),
        "errors": len(results) - len(ok), "tasks": len(finals),
        "final_macro": statistics.mean(finals) if finals else 0.0,
        "success_macro": statistics.mean(succs) if succs else 0.0,
        "successes": sum(r["success"] for r in ok), "ended_at_minus_100": sum(r["raw_final"] <= -100 for r in ok),
        "steps_at_success": statistics.mean(steps_succ) if steps_succ else None,
        "gate1_by_reason": dict(gate.most_common()), "reports_by_mode": dict(reports.most_common()),
        "menus_answered": sum(r["menus"] for r in ok), "steps_total": sum(r["steps"] for r in ok),
        "swift_latency_p50_ms": 1e3 * lat[len(lat) // 2] if lat else None,
        "wall_minutes": (time.time() - t0) / 60, "variations_per_task": args.variations,
        "step_limit": args.step_limit,
    }
    print(f"\n{args.variant}: {summary['tasks']} tasks, {summary['episodes']} episodes: Final "
          f"{summary['final_macro']:.2f}, successes {summary['successes']} ({summary['success_macro']:.1%} macro), "
          f"ended at -100: {summary['ended_at_minus_100']}, Steps@Succ {summary['steps_at_success']}, "
          f"{summary['wall_minutes']:.1f} min")
    if gate:
        print("Gate-1 decisions by reason:")
        for k, v in gate.most_common():
            print(f"  {k:40s} {v:6d}")
    if reports:
        print("Stagnation reports by mode:")
        for k, v in reports.most_common():
            print(f"  {k:40s} {v:6d}")
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"{args.variant.replace('-', '_')}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "episodes": [{k: v for k, v in r.items() if k != "latencies"}
                                                                 for r in results]}, indent=1))


if __name__ == "__main__":
    main()
