"""Decision values of an evaluation: what every Sage pick, focus review, Gate-1 drop, Critic action and T1 retry
changed, against the road not taken (agent_core.evaluate.decision_value), and how fast rollouts run.

    .venv/bin/python benchmarks/decision_value.py assets/evaluations/cpu-30x2x30 --workers 2
    .venv/bin/python benchmarks/decision_value.py EVAL --presets baseline --mechanisms sage_pick --limit 100
    .venv/bin/python benchmarks/decision_value.py EVAL --speed --sample 12     # rollouts per minute, 1 and 2 workers

Writes EVAL/decision_values.json (the settings, the summary, every decision) and EVAL's report.md and results.json
again with the "Decision values" section. Rollouts are cached (default runs/rollouts/): a killed run resumes where
it stopped. `--limit N` takes N decisions per preset and mechanism, drawn with a fixed seed.
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_core.evaluate import decision_value as dv  # noqa: E402
from agent_core.rollout import DEFAULT_HORIZON, POLICIES, ROLLOUTS_DIR, run_rollouts  # noqa: E402


def pick(points: list[dv.DecisionPoint], limit: int | None, seed: int = 0) -> list[dv.DecisionPoint]:
    if not limit:
        return points
    groups: dict[tuple[str, str], list[dv.DecisionPoint]] = {}
    for p in points:
        groups.setdefault((p.preset, p.mechanism), []).append(p)
    out: list[dv.DecisionPoint] = []
    for key in sorted(groups):
        g = groups[key]
        out += g if len(g) <= limit else random.Random(f"{seed}:{key}").sample(g, limit)
    return sorted(out, key=lambda p: (dv.MECHANISMS.index(p.mechanism), p.preset, p.trace, p.step))


def speed(points: list[dv.DecisionPoint], sample: int, horizon: int) -> None:
    """Rollouts per minute on 1 and 2 local workers, each from an empty cache, on the same requests."""
    reqs = [p.requests("swift", horizon)[0] for p in points[:sample]]
    rates = {}
    for workers in (1, 2):
        tmp = Path(tempfile.mkdtemp(prefix="rollouts-"))
        try:
            t0 = time.perf_counter()
            outs = run_rollouts(reqs, workers=workers, out=tmp)
            wall = time.perf_counter() - t0
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        ok = sum(o.rollout is not None for o in outs)
        rates[workers] = 60 * ok / wall
        print(f"{workers} worker(s): {ok} rollouts in {wall:.1f} s = {rates[workers]:.1f} rollouts/min "
              f"(each: replay to its step in a fresh JVM, the branch's action, {horizon} Swift steps; "
              f"the workers' start included)", flush=True)
    print(f"2 workers against 1: {rates[2] / rates[1]:.2f}x")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("evaluation", help="an evaluation folder (traces/<preset>/*.jsonl)")
    ap.add_argument("--presets", nargs="*", default=None)
    ap.add_argument("--mechanisms", nargs="*", default=list(dv.MECHANISMS), choices=dv.MECHANISMS)
    ap.add_argument("--limit", type=int, default=None, help="decisions per preset and mechanism (a seeded sample)")
    ap.add_argument("--policy", default="swift", choices=POLICIES)
    ap.add_argument("--horizon", type=int, default=DEFAULT_HORIZON)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rollouts", default=str(ROLLOUTS_DIR), help="the rollout cache")
    ap.add_argument("--speed", action="store_true", help="time rollouts on 1 and 2 workers instead")
    ap.add_argument("--sample", type=int, default=12, help="--speed: rollouts per run")
    ap.add_argument("--note", default="", help="a sentence for the report (what this run covers)")
    args = ap.parse_args(argv)
    ev = Path(args.evaluation)
    points = dv.evaluation_points(ev, args.presets, args.mechanisms)
    if args.speed:
        speed(points, args.sample, args.horizon)
        return 0
    points = pick(points, args.limit)
    print(f"{len(points)} decisions in {ev}; 2 rollouts each (shared where two decisions ask for the same one)",
          flush=True)
    t0 = time.perf_counter()
    last = [0.0]

    def progress(n: int, total: int) -> None:
        now = time.perf_counter()
        if n == total or now - last[0] > 30:
            last[0] = now
            print(f"  {n}/{total} rollouts, {now - t0:.0f} s", flush=True)

    values = dv.measure(points, args.policy, args.horizon, workers=args.workers, out=args.rollouts,
                        on_done=progress)
    settings = {"policy": args.policy, "horizon": args.horizon, "presets": args.presets, "mechanisms": args.mechanisms,
                "limit": args.limit, "note": args.note, "written_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    data = dv.write(ev, values, settings)
    from agent_core.evaluate.report import write_reports

    if (ev / "evaluation.json").exists():
        write_reports(ev)
    for mech, row in data["summary"].items():
        ci = f"[{row['low']:+.2f}, {row['high']:+.2f}]" if row.get("low") is not None else ""
        print(f"{row['label']:>22}: {row['decisions']} decisions, {row['n']} changed the action: mean "
              f"{row['mean']:+.2f} {ci}, {row['wins']} won / {row['losses']} lost / {row['ties']} tied"
              + (f"; {row['errors']} failed" if row["errors"] else ""))
    print(f"{time.perf_counter() - t0:.0f} s; {ev / dv.FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
