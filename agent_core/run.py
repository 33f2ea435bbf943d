"""Run one episode from the command line.

    python -m agent_core.run --task boil --variation 0 --preset baseline --llm embedded
    python -m agent_core.run --task 1-1 --variation 5 --split test --llm openai \
        --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-7B-Instruct
    python -m agent_core.run --resume runs/<trace>.jsonl     # continue a run that was killed or stopped

Prints one progress line per step, writes the trace under runs/ as it goes, and a summary at the end.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from .config import PRESETS, load_config
from .trace import StepRecord


def add_model_args(ap: argparse.ArgumentParser) -> None:
    """The LLM and step-limit options every command that runs the agent takes (run, warmup)."""
    ap.add_argument("--llm", default=None, choices=["embedded", "openai"], help="LLM backend for Sage")
    ap.add_argument("--embedded-model", default=None, help="qwen2.5-coder-1.5b (default) or smollm2-135m")
    ap.add_argument("--base-url", default=None, help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    ap.add_argument("--model", default=None, help="model name at --base-url (default: the server's first)")
    ap.add_argument("--max-steps", type=int, default=None, help="step limit (default: env.step_limit, 100)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.FIELD=VALUE", help="override a field")


def model_overrides(args: argparse.Namespace) -> list[str]:
    """`section.field=value` overrides from the options of add_model_args."""
    out = list(args.set)
    for value, field in ((args.llm, "llm.backend"), (args.embedded_model, "llm.embedded_model"),
                         (args.base_url, "llm.base_url"), (args.model, "llm.model"),
                         (args.max_steps, "env.step_limit")):
        if value:
            out.append(f"{field}={value}")
    return out


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m agent_core.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", help="task name (boil), index (0-29) or id (1-1)")
    ap.add_argument("--variation", type=int, help="variation number of that task")
    ap.add_argument("--resume", metavar="TRACE", default=None,
                    help="continue an interrupted episode (killed, stopped, or ended by an error) in its own trace: "
                         "its recorded actions are replayed in a fresh JVM and checked, then the agent goes on")
    ap.add_argument("--strict", action="store_true",
                    help="with --resume: refuse when the code or the settings differ from those that recorded it")
    ap.add_argument("--split", choices=["train", "dev", "test"], default=None,
                    help="require the variation to be in this split (default: any)")
    ap.add_argument("--preset", default="baseline", choices=list(PRESETS))
    add_model_args(ap)
    ap.add_argument("--config", default=None, help="JSON or TOML config file")
    ap.add_argument("--runs-dir", default=None, help="where to write the trace (default: runs/)")
    ap.add_argument("--quiet", action="store_true")
    return ap


def resume_config(args: argparse.Namespace):
    """(the interrupted episode, the config it ran with + this command's model options) for --resume."""
    from .config import Config, apply_overrides
    from .trace import TraceError, read_episode

    try:
        ep = read_episode(args.resume)
    except TraceError as e:
        raise ValueError(f"cannot resume: {e}") from None
    from .episode import resume_problem

    problem = resume_problem(ep)
    if problem:
        raise ValueError(problem)
    cfg = Config.from_dict(ep.header.config)
    extra = model_overrides(args)
    return ep, (apply_overrides(cfg, extra) if extra else cfg)


def progress_line(rec: StepRecord) -> str:
    why = f"/{rec.trigger.name}" if rec.trigger else ""
    obs = " ".join(rec.observation.split())
    obs = obs if len(obs) <= 70 else obs[:67] + "..."
    reward = f" ({rec.reward:+g})" if rec.reward else ""
    srm = []  # what self-reflection did at this step, when it ran
    drops = sum(g.decision == "DROP" for g in rec.gate1)
    if drops:
        srm.append(f"Gate-1 dropped {drops}")
    if rec.menu:
        srm.append(f"menu -> {rec.menu.chosen}")
    if rec.critic:
        srm.append(f"Critic {rec.critic.status}")
    if rec.stagnation:
        srm.append("stagnation: " + ", ".join(rec.stagnation.modes))
    for w in rec.memories_written:  # AMM
        srm.append(f"memory {'write failed' if w.error else 'wrote ' + w.tag}")
    for x in rec.retrievals:
        srm.append(f"{x.trigger}: " + ("failed" if x.error else f"{len(x.injected_ids)} injected into {x.injected_into}"
                                      if x.injected_into else "logged"))
    extra = f"  [{'; '.join(srm)}]" if srm else ""
    return f"step {rec.step:3d} [{rec.system}{why}] {rec.action} -> {obs}  score {rec.score:g}{reward}{extra}"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    parent = None
    try:
        if args.resume:
            parent, cfg = resume_config(args)
        else:
            if args.task is None or args.variation is None:
                raise ValueError("give --task and --variation (or --resume TRACE)")
            cfg = load_config(args.config, args.preset, model_overrides(args))
            from .env import catalog

            catalog().check_variation(args.task, args.variation, args.split)  # clear error before loading models
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    from .controller import RUNS_DIR, Agent, load_swift
    from .llm import make_backend

    t0 = time.perf_counter()
    try:
        swift = load_swift(cfg)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    llm = make_backend(cfg.llm, seed=cfg.seed)
    agent = Agent(cfg, swift, llm, runs_dir=args.runs_dir or RUNS_DIR)
    try:
        if parent is not None:
            from .controller import ReplayError

            try:
                header = agent.resume(parent, strict=args.strict)
            except ReplayError as e:
                print(f"error: cannot resume {parent.path}: {e}", file=sys.stderr)
                agent.close()
                return 1
            if not args.quiet:
                r = agent.resumed[-1]
                print(f"resumed {parent.path} after step {r['at_step']} (replayed and checked in {r['replay_s']:.1f} s; "
                      f"it had ended: {r['previous_end']})" + ("" if r["exact"] else
                      "; not exact: " + ("; ".join(r["changes"] + ([f"the LLM's cache: {r['llm_cache']}"]
                                                                          if r.get("llm_cache") else []))
                                          or "the trace predates the state digest")))
        else:
            header = agent.start(args.task, args.variation, split=args.split)
        if not args.quiet:
            print(f"{header.task} (#{header.task_index}) variation {header.variation} [{header.split}], "
                  f"preset {cfg.preset}, Swift {header.models['swift']}, Sage {header.models['sage']}")
            print(f"task: {header.task_description}")
            print(f"trace: {agent.trace_path}")
        summary = agent.run(on_step=None if args.quiet else (lambda r: print(progress_line(r), flush=True)))
    except KeyboardInterrupt:
        summary = agent.finish("stopped")
    except Exception as e:  # noqa: BLE001 - the trace keeps every finished step; say what happened
        summary = agent.finish("error", error=f"{type(e).__name__}: {e}")
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
    finally:
        agent.close()
    if summary is None:  # the episode never started (e.g. the JVM could not load the task): nothing to report
        print("no episode was recorded", file=sys.stderr)
        return 1
    systems = Counter(r.system for r in agent.records)
    triggers = Counter(r.trigger.name for r in agent.records if r.trigger)
    by = ", ".join(f"{systems[s]} {s.capitalize()}" for s in ("swift", "sage", "critic") if systems[s])
    print(f"\n== {summary.reason}: final score {summary.final_score:g}, {summary.steps} steps "
          f"({by or 'none'}), triggers {dict(triggers) or '{}'}, {time.perf_counter() - t0:.0f} s")
    if cfg.srm.enabled:
        drops = Counter(g.reason for r in agent.records for g in r.gate1 if g.decision == "DROP")
        critic = Counter(r.critic.status for r in agent.records if r.critic)
        print(f"   SRM: Gate-1 drops {dict(drops) or '{}'}, stagnation reports "
              f"{sum(1 for r in agent.records if r.stagnation)}, Critic {dict(critic) or '{}'}")
    if cfg.amm.enabled and summary is not None:
        m = summary.memory
        print(f"   AMM: writes {m.get('writes', {})}, triggers {m.get('triggers', {})}, injections "
              f"{m.get('injections', {})}, errors {m.get('errors', 0)}; store {m.get('store', '')}; "
              f"reflection: {m.get('reflection', '')}")
    if summary.resumed:
        print(f"   resumed {len(summary.resumed)}x: after step " + ", ".join(str(r["at_step"]) for r in summary.resumed))
    print(f"trace: {agent.trace_path}")
    return 0 if summary.reason != "error" else 1


if __name__ == "__main__":
    sys.exit(main())
