"""Per-step latency of the ScienceWorld adapter next to the raw `scienceworld` env on the same actions.

    .venv/bin/python benchmarks/env_step.py [--tasks boil melt ...] [--repeats 3]

Both replay the gold action sequence of each task's first test variation, in the same JVM process
(the adapter wraps one `ScienceWorldEnv`; the raw env is a second one), alternating so both see the
same machine load. The adapter's step returns the observation, score, look and inventory; valid
actions are computed on demand, so a step that also asks for them is timed separately.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

import argparse
import statistics
import time

from agent_core.env import ScienceWorld, catalog, simplifications_for
from benchmarks.episode_pool import pct


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", nargs="*", default=["boil", "melt", "find-living-thing", "grow-plant",
                                                   "test-conductivity"])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    from scienceworld import ScienceWorldEnv

    raw = ScienceWorldEnv("", envStepLimit=10 ** 6)
    ad = ScienceWorld()
    t_raw: list[float] = []
    t_ad: list[float] = []
    t_ad_valid: list[float] = []
    for name in args.tasks:
        var = catalog().get(name).test[0]
        simp = simplifications_for(name)
        ad.reset(name, var, generate_gold=True)
        gold = ad.gold_actions()
        for n, a in enumerate(gold, 1):  # the adapter ends the episode at 100: time the same prefix both ways
            if ad.step(a).done:
                gold = gold[:n]
                break
        for _ in range(args.repeats):
            raw.load(name, var, simp)
            raw.reset()
            for a in gold:
                t0 = time.perf_counter()
                raw.step(a)
                t_raw.append(time.perf_counter() - t0)
            ad.reset(name, var)
            for a in gold:
                t0 = time.perf_counter()
                ad.step(a)
                t_ad.append(time.perf_counter() - t0)
            ad.reset(name, var)
            for a in gold:
                t0 = time.perf_counter()
                ad.step(a)
                ad.valid_actions()
                t_ad_valid.append(time.perf_counter() - t0)
    raw.close()
    ad.close()
    m_raw, m_ad, m_adv = (statistics.median(x) * 1e3 for x in (t_raw, t_ad, t_ad_valid))
    print(f"tasks: {', '.join(args.tasks)}; {len(t_raw)} steps each way")
    print(f"{'':32s} {'median ms':>10s} {'p95 ms':>8s}")
    print(f"{'raw scienceworld env.step':32s} {m_raw:10.2f} {pct(t_raw, .95) * 1e3:8.2f}")
    print(f"{'adapter step':32s} {m_ad:10.2f} {pct(t_ad, .95) * 1e3:8.2f}")
    print(f"{'adapter step + valid_actions()':32s} {m_adv:10.2f} {pct(t_ad_valid, .95) * 1e3:8.2f}")
    print(f"speed-up of adapter step over raw: {m_raw / m_ad:.1f}x")


if __name__ == "__main__":
    main()
