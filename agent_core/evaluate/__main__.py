"""Evaluate presets x tasks x test variations (docs/AGENT.md §8) and write the paper's tables.

    python -m agent_core.evaluate --out evals/cpu-30x50 --variations 1 --max-steps 50
    python -m agent_core.evaluate --out evals/full --workers 8 --llm openai \\
        --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-7B-Instruct      # 271 x 4 on vLLM
    python -m agent_core.evaluate --out evals/full --backend ray --address ray://HEAD:10001 ...

Defaults: the four presets (baseline, amm, srm, full), all 30 tasks, the first 10 test variations of each
(271 episodes per preset), 100 steps. Every episode is a normal trace under OUT/traces/<preset>/ that the
Run page opens. Rerunning the same command resumes: finished episodes (a trace with a summary) are kept,
a half-written one is set aside and played again. OUT/results.json and OUT/report.md hold the tables.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..config import PRESETS, EnvConfig, EvalConfig
from ..run import add_model_args, model_overrides
from .spec import DEFAULT_PRESETS, EvalError, EvalSpec, prepare_dir, trace_path


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m agent_core.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="evaluation directory (new, or one to resume)")
    ap.add_argument("--presets", nargs="+", default=list(DEFAULT_PRESETS), metavar="PRESET",
                    help=f"presets to evaluate (default: {' '.join(DEFAULT_PRESETS)}; all: {', '.join(PRESETS)})")
    ap.add_argument("--tasks", nargs="+", default=[], metavar="TASK", help="task names, indices or ids (default: all 30)")
    ap.add_argument("--variations", default=str(EvalConfig().variations_per_task),
                    help="N: the first N test variations of each task (default: eval.variations_per_task, 10); "
                         "or a comma list, e.g. 0,3")
    ap.add_argument("--split", default=EvalConfig().split, choices=["train", "dev", "test"],
                    help="default: eval.split, test (as the paper)")
    add_model_args(ap)
    ap.add_argument("--config", default=None, help="JSON or TOML config file applied to every preset")
    ap.add_argument("--workers", type=int, default=1, help="episodes played at once (one JVM each)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads per worker (default: cores / workers)")
    ap.add_argument("--backend", default="local", choices=["local", "ray"],
                    help="local worker processes (default) or Ray actors on a Ray cluster")
    ap.add_argument("--address", default=None, help="Ray cluster address (default: start a local one)")
    ap.add_argument("--reuse-jvm", action="store_true",
                    help="keep one JVM per worker across episodes (faster start; results then depend on the order)")
    ap.add_argument("--keep-stores", action="store_true", help="keep each AMM episode's memory store")
    ap.add_argument("--report-only", action="store_true", help="rewrite results.json / report.md from the traces")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def spec_from_args(args: argparse.Namespace) -> EvalSpec:
    v = str(args.variations).strip()
    try:
        if "," in v:
            variations, variation_list = 0, [int(x) for x in v.split(",") if x.strip()]
        else:
            variations, variation_list = int(v), []
    except ValueError:
        raise EvalError(f"--variations {v!r}: give a count (10) or a comma list of variations (0,3)") from None
    overrides = [o for o in model_overrides(args) if not o.startswith("env.step_limit=")]
    return EvalSpec(presets=list(args.presets), tasks=[str(t) for t in args.tasks], variations=variations,
                    variation_list=variation_list, split=args.split, step_limit=args.max_steps or EnvConfig().step_limit,
                    overrides=overrides, config_file=args.config, fresh_jvm=not args.reuse_jvm)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    from .report import write_reports
    from .runner import episode_state

    try:
        spec = spec_from_args(args)
        jobs = spec.jobs()  # every check before any JVM starts
        if args.workers < 1:
            raise EvalError(f"--workers {args.workers}: use at least 1")
        prepare_dir(out, spec, jobs)
    except (EvalError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.report_only:
        res = write_reports(out)
        print(f"{res['episodes_done']} of {res['episodes_asked']} episodes; wrote {out / 'report.md'}")
        return 0
    states = {j: episode_state(trace_path(out, j)) for j in jobs}
    todo = [j for j in jobs if states[j] != "done"]
    partial = sum(1 for j in todo if states[j] == "partial")
    print(f"{len(jobs)} episodes ({len(spec.presets)} presets); {len(jobs) - len(todo)} already finished, "
          f"{len(todo)} to play ({partial} interrupted ones again), {args.workers} {args.backend} worker(s); "
          f"traces in {out / 'traces'}", flush=True)
    from tqdm import tqdm

    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), unit="episode", disable=args.quiet,
               dynamic_ncols=True, smoothing=0.1)
    errors = []

    def on_row(row: dict) -> None:
        bar.update(1)
        bar.set_postfix_str(f"last: {row['preset']} {row['task']} v{row['variation']} "
                            f"{'ERROR' if row['reason'] == 'error' else format(row['raw_final'], 'g')}")
        if row["reason"] == "error":
            errors.append(row)
            tqdm.write(f"  error in {row['preset']} {row['task']} v{row['variation']}: {row['error']}")

    t0 = time.perf_counter()
    try:
        if args.backend == "ray":
            from .ray_runner import run_ray

            run_ray(spec, out, todo, args.workers, on_row, address=args.address, threads=args.threads or 1)
        else:
            from .local import run_local

            run_local(spec, out, todo, args.workers, on_row, keep_stores=args.keep_stores, threads=args.threads)
    except KeyboardInterrupt:
        bar.close()
        print("\nstopped: finished episodes are kept; rerun the same command to resume", file=sys.stderr)
        write_reports(out)
        return 130
    except RuntimeError as e:
        bar.close()
        print(f"error: {e}", file=sys.stderr)
        write_reports(out)
        return 1
    bar.close()
    wall = time.perf_counter() - t0
    res = write_reports(out, wall_s=wall if todo else None,
                        extra={"backend": args.backend, "workers": args.workers})
    for p in res["preset_order"]:
        m = res["presets"][p]
        print(f"{p:18s} Final {m['final']:6.2f}  Success {100 * m['success']:6.2f}%  Steps@Succ "
              f"{m['steps_at_success'] if m['steps_at_success'] is not None else '-':>6}  "
              f"({m['episodes']} episodes, {m['tasks']} tasks)")
    print(f"wrote {out / 'results.json'} and {out / 'report.md'} ({wall / 60:.1f} min)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
