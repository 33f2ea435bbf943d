"""Baseline (Swift + Sage) with the embedded default LLM, on a CPU, against Swift alone on the same episodes.

    .venv/bin/python benchmarks/baseline_embedded.py [--variations 1] [--step-limit 50] [--set k=v ...]
    .venv/bin/python benchmarks/srm_swift.py --variant swift --variations 1 --step-limit 50   # Swift alone

The agent's own loop (`agent_core.controller.Agent`, preset `baseline`) with the shipped embedded model
(Qwen2.5-Coder-1.5B through llama.cpp) on the first test variation of every task (30 episodes), 50 steps.
One episode at a time (llama.cpp already uses both cores). Each finished episode is appended to
`<out>.jsonl` at once and skipped when the script is started again, so a long run resumes where it
stopped. Prints Final, successes, episodes ending at -100, steps handed to Sage, the switching rules
that fired, and the Sage call's p50 / p95 (plan + grounding, one call of Sage), and writes `<out>.json`.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from benchmarks.episode_pool import add_episode_args, episode_jobs, macro_scores, pct  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def run_episode(agent, task: str, variation: int) -> dict:
    t0 = time.perf_counter()
    agent.start(task, variation, split="test")
    sage_s: list[float] = []
    calls: dict[str, list[float]] = {}
    triggers: Counter = Counter()
    while not agent.done:
        rec = agent.step()
        if rec.trigger is not None:
            triggers[rec.trigger.name] += 1
        if "sage" in rec.timings:
            sage_s.append(rec.timings["sage"])
        for c in rec.llm_calls:
            if not c.error:
                calls.setdefault(c.purpose, []).append(c.latency_s)
    s = agent.finish()
    recs = agent.records
    return {"task": task, "variation": variation, "final": max(0.0, s.final_score), "raw_final": s.final_score,
            "success": s.success, "steps": s.steps, "sage_steps": sum(r.system == "sage" for r in recs),
            "sage_calls": len(sage_s), "sage_seconds": sage_s, "llm_seconds": calls, "triggers": dict(triggers),
            "llm_errors": sum(1 for r in recs for c in r.llm_calls if c.error),
            "actions": [r.action for r in recs], "systems": [r.system for r in recs],
            "wall_s": time.perf_counter() - t0, "trace": str(agent.trace_path)}


def main() -> None:
    ap = argparse.ArgumentParser()
    add_episode_args(ap)
    ap.set_defaults(variations=1, step_limit=50, workers=1)
    ap.add_argument("--set", nargs="*", default=[], help="config overrides, e.g. controller.invalid_rule=top1")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "baseline_embedded"))
    args = ap.parse_args()

    from agent_core.config import apply_overrides, preset
    from agent_core.controller import Agent, load_swift
    from agent_core.llm import make_backend

    tasks, jobs = episode_jobs(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".jsonl")
    done = [json.loads(x) for x in partial.read_text().splitlines() if x.strip()] if partial.exists() else []
    todo = [(t, v) for t, v in jobs if (t, v) not in {(d["task"], d["variation"]) for d in done}]
    cfg = apply_overrides(preset("baseline"), [*args.set, f"env.step_limit={args.step_limit}"])
    agent = Agent(cfg, load_swift(cfg), make_backend(cfg.llm), runs_dir=Path(tempfile.mkdtemp(prefix="baseline_")))
    print(f"{len(done)} episodes already done, {len(todo)} to go ({cfg.llm.backend}: {agent.llm.model})", flush=True)
    try:
        for i, (task, var) in enumerate(todo, len(done) + 1):
            try:
                r = run_episode(agent, task, var)
            except Exception as e:  # noqa: BLE001 - one broken episode is reported, the run goes on
                r = {"task": task, "variation": var, "error": f"{type(e).__name__}: {e}"}
            with partial.open("a") as f:
                f.write(json.dumps(r) + "\n")
            done.append(r)
            print(f"  [{i}/{len(jobs)}] {task} v{var}: " + (r["error"] if "error" in r else
                  f"final {r['raw_final']:g} in {r['steps']} steps, {r['sage_calls']} Sage calls, "
                  f"{r['sage_steps']} steps by Sage, {r['wall_s'] / 60:.1f} min"), flush=True)
    finally:
        agent.close()
    ok = [r for r in done if "error" not in r]
    scores = macro_scores(tasks, done, table=False)
    sage = [x for r in ok for x in r["sage_seconds"]]
    by_purpose: dict[str, list[float]] = {}
    for r in ok:
        for k, v in r["llm_seconds"].items():
            by_purpose.setdefault(k, []).extend(v)
    trig = Counter()
    for r in ok:
        trig.update(r["triggers"])
    summary = {**scores, "overrides": args.set, "step_limit": args.step_limit, "model": agent.llm.model,
               "sage_calls": len(sage), "sage_call_p50_s": pct(sage, 0.5), "sage_call_p95_s": pct(sage, 0.95),
               "llm_call_p50_s": {k: pct(v, 0.5) for k, v in by_purpose.items()},
               "steps_total": sum(r["steps"] for r in ok), "steps_by_sage": sum(r["sage_steps"] for r in ok),
               "triggers": dict(trig.most_common()), "llm_errors": sum(r["llm_errors"] for r in ok),
               "wall_minutes": sum(r["wall_s"] for r in ok) / 60}
    print(f"\nBaseline ({summary['model']}), {summary['episodes']} episodes: Final {summary['final_macro']:.2f}, "
          f"successes {summary['successes']}, ended at -100: {summary['ended_at_minus_100']}; "
          f"{summary['sage_calls']} Sage calls, p50 {summary['sage_call_p50_s'] or 0:.1f} s / p95 "
          f"{summary['sage_call_p95_s'] or 0:.1f} s; {summary['steps_by_sage']} of {summary['steps_total']} steps by "
          f"Sage; triggers {summary['triggers']}; {summary['wall_minutes']:.0f} min")
    out.with_suffix(".json").write_text(json.dumps({"summary": summary, "episodes": done}, indent=1))


if __name__ == "__main__":
    main()
