"""Swift-only agent (no Sage, no LLM) on ScienceWorld test variations.

    .venv/bin/python benchmarks/swift_only.py [--variations 3] [--step-limit 100] [--workers 2]
        [--quantize int8|none] [--focus-margin 0.5] [--unconstrained-beams 3]

Each step Swift ranks the current valid actions (beam search constrained to their prefix tree) and
the best one is taken (after the loop guard, unless --no-loop-guard; in the agent the loop guard is part of
SRM, benchmarks/srm_swift.py runs the agent's own loop without it); when it has no preference among
valid actions the unconstrained top-1 is sent as is. This is exactly the agent's Swift (ModelSwift). Prints per-task and average Final score (negative counted as 0), success rate,
Steps@Succ, episodes ending at -100 and inference latency p50/p95, and writes the raw results to
benchmarks/results/. Each `focus on` Swift proposes is logged with the model's probabilities over every
focus target in view, its margin, whether it was set aside (`--focus-margin`) and what happened.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.config import SRMConfig, SwiftConfig  # noqa: E402
from agent_core.env import ScienceWorld  # noqa: E402
from agent_core.swift.format import SwiftState  # noqa: E402
from benchmarks.episode_pool import add_episode_args, episode_jobs, macro_scores, run_pool, serve_jobs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def run_episode(env: ScienceWorld, swift, task: str, variation: int) -> dict:
    obs = env.reset(task, variation, split="test")
    state = SwiftState(task=task, task_description=obs.task_description, score=obs.score, look=obs.look,
                       inventory=obs.inventory, start_room=obs.room)
    lat: list[float] = []
    actions: list[str] = []
    guarded = 0
    focus: list[dict] = []
    while not obs.done:
        valid = env.valid_actions()
        t0 = time.perf_counter()
        prop = swift.propose(state, valid)
        lat.append(time.perf_counter() - t0)
        guarded += bool(prop.guard)
        obs = env.step(prop.action)
        actions.append(prop.action)
        if prop.focus or prop.focus_unnamed:
            focus.append({"step": len(actions), "margin": prop.focus_margin, "top": [(a, round(p, 4)) for a, p in prop.focus[:3]],
                          "top1": prop.top1, "unnamed": prop.focus_unnamed[:8],
                          "deferred": prop.deferred, "taken": prop.action, "reward": obs.reward, "score": obs.score,
                          "ended": obs.done})
        # the agent's own history builder (no-op steps left out), as in training
        state.observe(prop.action, obs.text, obs.reward, obs.room, obs.score, obs.look, obs.inventory)
    return {"task": task, "variation": variation, "final": max(0.0, obs.score), "raw_final": obs.score,
            "success": obs.score >= 100, "steps": len(actions), "latencies": lat, "actions": actions,
            "loop_guard_interventions": guarded, "focus": focus}


def worker(jobs: list[tuple[str, int]], args, out_q) -> None:
    import torch

    from agent_core.controller import ModelSwift
    from agent_core.swift.model import SwiftModel

    torch.set_num_threads(1)
    model = SwiftModel(args.model, threads=1, quantize=args.quantize, unconstrained_beams=args.unconstrained_beams)
    swift = ModelSwift(model, args.k, args.n, loop_guard=not args.no_loop_guard,
                       loop_guard_streak=SRMConfig().loop_guard_streak, focus_margin=args.focus_margin,
                       defer_unsure_focus=args.focus_margin > 0, task_focus_check=not args.no_task_focus_check)
    env = ScienceWorld()
    env.cfg.step_limit = args.step_limit
    try:
        serve_jobs(jobs, lambda task, var: run_episode(env, swift, task, var), out_q)
    finally:
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(ROOT / "assets" / "swift" / "model"))
    add_episode_args(ap)
    sc = SwiftConfig()
    ap.add_argument("--k", type=int, default=sc.history_k, help="history window (docs/AGENT.md §2: 10)")
    ap.add_argument("--n", type=int, default=sc.num_candidates, help="beam candidates")
    ap.add_argument("--no-loop-guard", action="store_true", help="take Swift's best valid action even in a loop")
    ap.add_argument("--quantize", default=sc.quantize, choices=["int8", "none"])
    ap.add_argument("--unconstrained-beams", type=int, default=sc.unconstrained_beams)
    ap.add_argument("--focus-margin", type=float, default=sc.focus_margin if sc.defer_unsure_focus else 0.0,
                    help="set a focus aside when p(best target) - p(second) is below this (0: never, the default "
                         "as swift.defer_unsure_focus is off)")
    ap.add_argument("--no-task-focus-check", action="store_true",
                    help="let Swift focus on objects the task does not name (agent_core/task_focus.py)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "swift_only.json"))
    args = ap.parse_args()
    tasks, jobs = episode_jobs(args)
    results, wall = run_pool(worker, jobs, args, args.workers)
    ok = [r for r in results if "error" not in r]
    scores = macro_scores(tasks, results)
    lat = sorted(x for r in ok for x in r["latencies"])
    summary = {
        **scores,
        "latency_p50_ms": 1e3 * lat[len(lat) // 2] if lat else None,
        "latency_p95_ms": 1e3 * lat[int(0.95 * (len(lat) - 1))] if lat else None,
        "wall_minutes": wall, "model": args.model, "variations_per_task": args.variations,
        "step_limit": args.step_limit, "loop_guard": not args.no_loop_guard,
        "loop_guard_interventions": sum(r.get("loop_guard_interventions", 0) for r in ok),
        "steps_total": sum(r["steps"] for r in ok),
        "ended_at_minus_100": sum(r["raw_final"] <= -100 for r in ok),
        "focus_proposed": sum(len(r["focus"]) for r in ok),
        "focus_deferred": sum(bool(f["deferred"]) for r in ok for f in r["focus"]),
        "quantize": args.quantize, "focus_margin": args.focus_margin, "unconstrained_beams": args.unconstrained_beams,
    }
    print(f"\nAVERAGE over {summary['tasks']} tasks ({summary['episodes']} episodes): Final "
          f"{summary['final_macro']:.2f}, success {summary['success_macro']:.1%}, Steps@Succ "
          f"{summary['steps_at_success']}, {summary['ended_at_minus_100']} at -100, latency p50 {summary['latency_p50_ms']:.0f} ms / p95 "
          f"{summary['latency_p95_ms']:.0f} ms, {summary['wall_minutes']:.1f} min")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "episodes": [{k: v for k, v in r.items() if k != "latencies"}
                                                                 for r in results]}, indent=1))


if __name__ == "__main__":
    main()
