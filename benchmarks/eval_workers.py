"""1 vs N local workers for `python -m agent_core.evaluate`: the same episodes, wall time and speed-up, and a
check that the metrics are identical (each episode plays in a fresh JVM, so the order does not matter).

    .venv/bin/python benchmarks/eval_workers.py                       # Swift alone, 2 presets x 6 tasks, 30 steps
    .venv/bin/python benchmarks/eval_workers.py --workers 1 2 --llm   # with the embedded Sage (slow)

Without --llm, Sage and the Critic are off (`controller.sage_enabled=false`, `srm.critic_enabled=false`), so
the measurement is the evaluation machinery plus Swift and ScienceWorld, not llama.cpp sharing the cores.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--tasks", nargs="+", default=["0", "5", "13", "17", "22", "29"])
    ap.add_argument("--presets", nargs="+", default=["baseline", "srm"])
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--llm", action="store_true", help="keep Sage and the Critic on (embedded model)")
    args = ap.parse_args()
    from agent_core.evaluate import comparable

    common = ["--tasks", *args.tasks, "--variations", "1", "--presets", *args.presets, "--max-steps",
              str(args.max_steps), "--quiet"]
    if not args.llm:
        common += ["--set", "controller.sage_enabled=false", "--set", "srm.critic_enabled=false"]
    walls, results = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for w in args.workers:
            out = Path(tmp) / f"w{w}"
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "agent_core.evaluate", "--out", str(out), "--workers", str(w),
                                *common], cwd=ROOT, capture_output=True, text=True)
            walls[w] = time.perf_counter() - t0
            if r.returncode != 0:
                sys.exit(f"workers={w} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
            results[w] = json.loads((out / "results.json").read_text())
            n = results[w]["episodes_done"]
            print(f"{w} worker(s): {n} episodes in {walls[w]:.1f} s ({walls[w] / n:.1f} s per episode, "
                  f"model loading included)", flush=True)
    base = args.workers[0]
    for w in args.workers[1:]:
        same = comparable(results[w]) == comparable(results[base])
        print(f"speed-up {base} -> {w} workers: {walls[base] / walls[w]:.2f}x; identical metrics: {same}")
    for p, m in results[base]["presets"].items():
        print(f"  {p}: Final {m['final']:.2f}, successes {m['successes']}/{m['episodes']}")


if __name__ == "__main__":
    main()
