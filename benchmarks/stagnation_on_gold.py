"""How often the stagnation detector fires on expert play: every committed gold trajectory (train + dev,
assets/swift/gold_trajectories.jsonl.gz) replayed as step records, the detector run after every step, as
the agent runs it. A report on a gold path is a false alarm (and, with SRM on, binds Swift's next actions).

    .venv/bin/python benchmarks/stagnation_on_gold.py
"""
from __future__ import annotations

import gzip
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.config import SRMConfig  # noqa: E402
from agent_core.gold import GOLD_PACK  # noqa: E402
from agent_core.srm.stagnation import detect  # noqa: E402
from agent_core.trace import StepRecord  # noqa: E402


def gold_records(traj: dict) -> list[StepRecord]:
    out = []
    for i, s in enumerate(traj["steps"], 1):
        out.append(StepRecord(step=i, action=s["action"], system="swift", observation=s["observation"], look=s["look"],
                              inventory=s["inventory"], score=float(s["score"]), reward=float(s["reward"]), moves=i,
                              done=False, failed=False, room=s["room"], action_valid=True))
    return out


def reports_on_gold(cfg: SRMConfig | None = None) -> tuple[int, int, int, Counter, Counter]:
    """(trajectories, steps, reports, reports by mode, trajectories with a report by task)."""
    import json

    cfg = cfg or SRMConfig()
    n_traj = n_steps = n_reports = 0
    modes, tasks = Counter(), Counter()
    with gzip.open(GOLD_PACK, "rt", encoding="utf-8") as fh:
        for line in fh:
            traj = json.loads(line)
            recs = gold_records(traj)
            n_traj += 1
            n_steps += len(recs)
            last = None
            hit = False
            for i in range(1, len(recs) + 1):
                rep = detect(recs[:i], cfg, last)
                if rep:
                    last = recs[i - 1].step
                    n_reports += 1
                    modes.update(rep.modes)
                    hit = True
            tasks[traj["task"]] += hit
    return n_traj, n_steps, n_reports, modes, tasks


def main() -> None:
    n_traj, n_steps, n_reports, modes, tasks = reports_on_gold()
    print(f"{n_traj} gold trajectories, {n_steps} steps: {n_reports} reports "
          f"({1000 * n_reports / max(n_steps, 1):.1f} per 1,000 steps), "
          f"{sum(tasks.values())} trajectories with at least one")
    for m, c in modes.most_common():
        print(f"  {m:32s} {c:6d}")
    print("trajectories with a report, by task:")
    for t, c in tasks.most_common():
        if c:
            print(f"  {t:52s} {c:5d}")


if __name__ == "__main__":
    main()
