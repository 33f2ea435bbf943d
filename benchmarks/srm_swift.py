"""Swift alone vs Swift + Gate-1 + the stagnation detector (SRM without its Critic) vs Swift + AMM's T1,
no LLM anywhere.

    .venv/bin/python benchmarks/srm_swift.py --variant swift --workers 2        # Swift alone, no loop guard
    .venv/bin/python benchmarks/srm_swift.py --variant swift-loop-guard          # Swift alone + its loop guard
    .venv/bin/python benchmarks/srm_swift.py --variant swift-srm --workers 2    # + Gate-1, stagnation, loop guard
    .venv/bin/python benchmarks/srm_swift.py --variant swift-amm --workers 2    # + AMM: writes, T1 retry with memory

Both run the agent's own loop (agent_core.controller.Agent) with Sage switched off
(`controller.sage_enabled=false`), on the first 3 test variations of every task (90 episodes, 100 steps).
In `swift-srm`, Gate-1 checks every Swift candidate (focus limit, focus target visible, no-ops, the
stagnation report's actions to avoid) and the next-ranked admissible candidate is taken when one is
dropped; the stagnation detector's reports bind Swift for `srm.gate1_avoid_steps` steps. The Critic is off
(`srm.critic_enabled=false`): it needs an LLM. Prints Final, successes, episodes ending at -100, Gate-1
decisions by reason (the paper's Table 6 shape) and reports by mode; writes benchmarks/results/<variant>.json.
In `swift-amm` every episode starts from its own fresh copy of the shipped warm store (so episodes do not
learn from each other and the result is repeatable); it also reports AMM's cost per step (salience gate +
write + T1 retrieval, embedding included; Swift's retry is counted as Swift time) and what T1's retry did.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from benchmarks.episode_pool import add_episode_args, episode_jobs, macro_scores, run_pool, serve_jobs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {
    "swift": {"controller.sage_enabled": False},
    # Swift alone with its loop guard (the guard is part of SRM in the agent; here on its own)
    "swift-loop-guard": {"controller.sage_enabled": False},
    "swift-srm": {"controller.sage_enabled": False, "srm.enabled": True, "srm.critic_enabled": False},
    "swift-amm": {"controller.sage_enabled": False, "amm.enabled": True, "amm.reflection": "off"},
    # retrieve and log on T1 but never retry Swift with it: must play exactly like `swift`
    "swift-amm-no-t1": {"controller.sage_enabled": False, "amm.enabled": True, "amm.reflection": "off",
                        "amm.swift_injection": False},
}


def run_episode(agent, task: str, variation: int, store_root: Path | None = None) -> dict:
    import shutil

    if store_root is not None:  # AMM: a fresh copy of the warm store for this episode only
        agent.cfg.amm.store_dir = str(store_root / f"{task}-v{variation}")
    agent.start(task, variation, split="test")
    gate, modes, lat, amm_ms, amm_active, t1 = Counter(), Counter(), [], [], [], Counter()
    while not agent.done:
        rec = agent.step()
        lat.append(rec.timings.get("swift", 0.0))
        if "amm" in rec.timings:
            amm_ms.append(1e3 * rec.timings["amm"])
            if rec.memories_written or rec.retrievals:  # steps where AMM wrote or retrieved something
                amm_active.append(1e3 * rec.timings["amm"])
        for x in rec.retrievals:
            if x.trigger == "T1":
                t1["fired"] += 1
                t1["injected"] += x.injected_into == "swift"
                t1["retry_valid"] += "valid, it replaces" in x.outcome
        for d in rec.gate1:
            gate[f"{d.decision}:{d.reason}"] += 1
        if rec.stagnation:
            modes.update(rec.stagnation.modes)
    s = agent.finish()
    if store_root is not None:
        shutil.rmtree(store_root / f"{task}-v{variation}", ignore_errors=True)
    return {"task": task, "variation": variation, "final": max(0.0, s.final_score), "raw_final": s.final_score,
            "amm_ms": amm_ms, "amm_active_ms": amm_active, "t1": dict(t1), "memory": s.memory,
            "success": s.success, "steps": s.steps, "gate1": dict(gate), "reports": dict(modes),
            "menus": sum(1 for r in agent.records if r.menu), "latencies": lat,
            "actions": [r.action for r in agent.records]}


def worker(jobs: list[tuple[str, int]], args, out_q) -> None:
    import torch

    from agent_core.config import apply_overrides, preset
    from agent_core.controller import Agent, load_swift
    from agent_core.llm import ScriptedBackend

    torch.set_num_threads(1)
    os.environ["SWIFT_THREADS"] = "1"  # the figures of this benchmark are one thread's
    cfg = apply_overrides(preset("baseline"), {**VARIANTS[args.variant], "env.step_limit": args.step_limit})
    cfg.preset = args.variant
    swift = load_swift(cfg)
    swift.loop_guard = args.variant == "swift-loop-guard"
    runs = Path(tempfile.mkdtemp(prefix="srm_swift_"))
    agent = Agent(cfg, swift, ScriptedBackend([]), runs_dir=runs)  # no LLM: any call would fail loudly
    try:
        stores = runs / "stores" if cfg.amm.enabled else None
        serve_jobs(jobs, lambda task, var: run_episode(agent, task, var, stores), out_q)
    finally:
        agent.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=list(VARIANTS), required=True)
    add_episode_args(ap)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    tasks, jobs = episode_jobs(args)
    results, wall = run_pool(worker, jobs, args, args.workers)
    ok = [r for r in results if "error" not in r]
    scores = macro_scores(tasks, results, table=False)
    gate = Counter()
    reports = Counter()
    for r in ok:
        gate.update(r["gate1"])
        reports.update(r["reports"])
    lat = sorted(x for r in ok for x in r["latencies"] if x)
    amm = sorted(x for r in ok for x in r.get("amm_ms", []))
    active = sorted(x for r in ok for x in r.get("amm_active_ms", []))
    t1 = Counter()
    for r in ok:
        t1.update(r.get("t1", {}))
    summary = {
        "variant": args.variant, "overrides": VARIANTS[args.variant], **scores,
        "gate1_by_reason": dict(gate.most_common()), "reports_by_mode": dict(reports.most_common()),
        "menus_answered": sum(r["menus"] for r in ok), "steps_total": sum(r["steps"] for r in ok),
        "swift_latency_p50_ms": 1e3 * lat[len(lat) // 2] if lat else None,
        "amm_ms_per_step_p50": amm[len(amm) // 2] if amm else None,
        "amm_ms_per_step_p95": amm[int(len(amm) * 0.95)] if amm else None,
        "amm_ms_per_step_mean": sum(amm) / len(amm) if amm else None, "t1": dict(t1),
        "amm_ms_active_p50": active[len(active) // 2] if active else None,
        "amm_ms_active_p95": active[int(len(active) * 0.95)] if active else None, "amm_active_steps": len(active),
        "wall_minutes": wall, "variations_per_task": args.variations,
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
    if amm:
        print(f"AMM cost per step: p50 {summary['amm_ms_per_step_p50']:.1f} ms, p95 "
              f"{summary['amm_ms_per_step_p95']:.1f} ms, mean {summary['amm_ms_per_step_mean']:.1f} ms "
              f"over {len(amm)} steps; on the {len(active)} steps that wrote or retrieved: p50 "
              f"{summary['amm_ms_active_p50']:.1f} ms, p95 {summary['amm_ms_active_p95']:.1f} ms; T1 {dict(t1)}")
    if reports:
        print("Stagnation reports by mode:")
        for k, v in reports.most_common():
            print(f"  {k:40s} {v:6d}")
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"{args.variant.replace('-', '_')}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "episodes": [
        {k: v for k, v in r.items() if k not in ("latencies", "amm_ms", "amm_active_ms")} for r in results]}, indent=1))


if __name__ == "__main__":
    main()
