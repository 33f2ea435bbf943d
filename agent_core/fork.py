"""Rerun a recorded episode from one of its steps with another preset or LLM.

    python -m agent_core.fork runs/20261201-...-boil-v21-baseline-ab12cd.jsonl --step 12 --preset srm
    python -m agent_core.fork TRACE --step 0 --preset full --llm openai --base-url http://127.0.0.1:8000/v1

A fresh environment replays the recorded actions of steps 1..K and checks every observation and score
against the record (a divergence is a clear error); then the agent of the chosen preset plays on. The
fork is a new trace whose header names its parent and the fork step; the Compare page shows both
(`pages/5_Compare.py?a=PARENT&b=FORK`).
"""
from __future__ import annotations

import argparse
import sys
import time

from .config import PRESETS, load_config
from .run import add_model_args, model_overrides, progress_line


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m agent_core.fork", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="the recorded episode (a .jsonl trace)")
    ap.add_argument("--step", type=int, required=True, help="replay steps 1..STEP, then the new agent plays on")
    ap.add_argument("--preset", default=None, choices=list(PRESETS), help="default: the parent's preset")
    add_model_args(ap)
    ap.add_argument("--config", default=None, help="JSON or TOML config file")
    ap.add_argument("--runs-dir", default=None, help="where to write the fork's trace (default: runs/)")
    ap.add_argument("--quiet", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .trace import TraceError, read_episode

    try:
        parent = read_episode(args.trace)
        preset_name = args.preset or (parent.header.config or {}).get("preset", "baseline")
        cfg = load_config(args.config, preset_name, model_overrides(args))
        cfg.env.fresh_jvm = True  # the replay must see what the recording saw
    except (TraceError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not 0 <= args.step <= len(parent.steps):
        print(f"error: --step {args.step}: the recorded episode has steps 0-{len(parent.steps)}", file=sys.stderr)
        return 2
    from .controller import RUNS_DIR, Agent, ReplayError, load_swift
    from .llm import make_backend

    t0 = time.perf_counter()
    agent = Agent(cfg, load_swift(cfg), make_backend(cfg.llm, seed=cfg.seed), runs_dir=args.runs_dir or RUNS_DIR)
    try:
        header = agent.fork(parent, args.step)
        if not args.quiet:
            print(f"fork of {parent.path} at step {args.step} ({header.parent.get('replay_s', 0):.1f} s to replay "
                  f"and check {args.step} steps), preset {cfg.preset}; trace: {agent.trace_path}")
        summary = agent.run(on_step=None if args.quiet else (lambda r: print(progress_line(r), flush=True)))
    except ReplayError as e:
        print(f"error: {e}", file=sys.stderr)
        agent.close()
        return 1
    except KeyboardInterrupt:
        summary = agent.finish("stopped")
    finally:
        agent.close()
    print(f"\n== {summary.reason}: final score {summary.final_score:g} after {summary.steps} steps "
          f"(parent: {parent.summary.final_score if parent.summary else '?'}), {time.perf_counter() - t0:.0f} s")
    print(f"trace: {agent.trace_path}")
    print(f"compare: streamlit page Compare with a={parent.path} b={agent.trace_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
