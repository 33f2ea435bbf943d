"""Roll out the roads not taken at the interesting steps of the shipped example episodes, so a class sees them at
once on the Run page and in the offline export: every focus, and the steps where Sage, the Critic or Gate-1 changed
the action (at most --steps per episode). Kept in assets/episodes/rollouts/ (the Run page finds them there).

    .venv/bin/python scripts/branch_examples.py              # all examples, 3 steps each
    .venv/bin/python scripts/branch_examples.py --steps 2 assets/episodes/inclined-plane-*.jsonl
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_core.evaluate.decision_value import decision_points  # noqa: E402
from agent_core.rollout import DEFAULT_HORIZON, RolloutRequest, run_rollouts  # noqa: E402
from agent_core.trace import read_episode  # noqa: E402
from agent_core.trace.io import ROLLOUTS  # noqa: E402
from views.branches import candidates  # noqa: E402

EXAMPLES = ROOT / "assets" / "episodes"
ORDER = ("focus_review", "critic", "sage_pick", "gate1_drop", "t1_retry")


def interesting(ep, n: int) -> list[int]:
    """The steps shown (1-based) to branch at: focus steps first, then one of each mechanism's decisions."""
    steps = [r.step for r in ep.steps if r.action.startswith("focus on") and not r.replayed]
    pts = sorted(decision_points(ep), key=lambda p: (ORDER.index(p.mechanism), p.step))
    for p in pts:
        if p.step not in steps:
            steps.append(p.step)
    return sorted(steps[:n])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", help="default: every example in assets/episodes")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.traces] or sorted(EXAMPLES.glob("*.jsonl"))
    reqs = []
    for path in paths:
        ep = read_episode(path)
        for t in interesting(ep, args.steps):
            rec = ep.steps[t - 1]
            reqs += [RolloutRequest(str(path.relative_to(ROOT) if path.is_absolute() else path), t - 1, a, "swift",
                                    DEFAULT_HORIZON, label) for label, a in candidates(rec)]
    print(f"{len(reqs)} rollouts from {len(paths)} episode(s)", flush=True)
    outs = run_rollouts(reqs, workers=args.workers, out=EXAMPLES / ROLLOUTS,
                        on_done=lambda n, total, o: print(f"  {n}/{total} {o.request.trace} step {o.request.step}: "
                                                          + (f"{o.rollout.first_action!r} -> {o.rollout.final:g}"
                                                             if o.rollout else f"error: {o.error}"), flush=True))
    return 0 if all(o.rollout is not None for o in outs) else 1


if __name__ == "__main__":
    sys.exit(main())
