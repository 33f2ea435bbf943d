"""Warm-up: fill an episodic memory store by running the agent on train variations (docs/AGENT.md §5.4).

    python -m agent_core.warmup                       # 2 train variations per task (60 episodes), resumable
    python -m agent_core.warmup --sage --llm openai --base-url http://127.0.0.1:8000/v1   # with Sage (GPU)
    python -m agent_core.warmup --export assets/memory/warm_store.jsonl.gz             # and ship it

The episodes are not scored. They run the `amm` preset starting from an empty store (so nothing shipped
is read), on the train split only. By default Sage is off: on 2 CPU cores a Sage call of the embedded LLM
takes ~20 s (p50) and a 100-step episode makes dozens, so 60 episodes would take most of a day; Swift, the
salience gate and T1 run as always.
`--reflect` adds GA reflection between episodes with the chosen LLM. Progress is kept in
<store>/warmup_progress.json: run it again to continue where it stopped.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from .config import load_config
from .run import add_model_args, model_overrides

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_STORE = ROOT / "runs" / "warmup" / "store"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m agent_core.warmup", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default=str(DEFAULT_STORE), help="the store to fill (created empty if missing)")
    ap.add_argument("--variations", type=int, default=None, help="train variations per task (default: amm."
                                                                 "warmup_variations_per_task, 2)")
    ap.add_argument("--tasks", default="", help="comma-separated task names (default: all 30)")
    ap.add_argument("--sage", action="store_true", help="let Sage plan (slow on a CPU; plans are stored too)")
    ap.add_argument("--reflect", action="store_true", help="GA reflection between episodes (needs the LLM)")
    add_model_args(ap)
    ap.add_argument("--export", default=None, help="write the store as a shippable export (+ MANIFEST.json)")
    ap.add_argument("--export-only", action="store_true", help="export the store as it is; run nothing")
    ap.add_argument("--merge", default=None, metavar="OTHER_STORE",
                    help="append another warm-up store (run in parallel on other tasks) to --store, as if its "
                         "episodes had run after this store's, and merge its progress; then stop")
    return ap


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def first_of_each_content(stream) -> set[str]:
    """Ids to ship: within an episode only the first of records with the same content (the rule the agent
    applies when writing; stores built before that rule existed are exported as if it had)."""
    from .amm.salience import content_key

    seen, keep = set(), set()
    for m in stream.memories():
        e = m.extra or {}
        key = (m.episode, content_key(m.tag, e.get("action", ""), e.get("result", ""), e.get("room", ""))
               if e.get("action") else m.description)
        if key not in seen:
            seen.add(key)
            keep.add(m.id)
    return keep


def write_export(store: Path, export: Path, progress: dict, argv: list[str]) -> dict:
    from memory_store import MemoryConfig

    from .amm.store import export_store, open_agent_store

    stream = open_agent_store(store, MemoryConfig(persist_dir=str(store)))
    stream.refresh()
    n = export_store(stream, export, keep=first_of_each_content(stream))
    mems = [m for m in stream.memories() if m.id in first_of_each_content(stream)]
    by_tag = Counter(m.tag or m.type for m in mems)
    by_task: dict[str, dict[str, int]] = {}
    for m in mems:
        by_task.setdefault(m.task, Counter())[m.tag or m.type] += 1
    episodes = progress.get("episodes", [])
    manifest = {
        "what": "episodic memory built by this project's warm-up run (agent_core/warmup.py)",
        "command": "python -m agent_core.warmup " + " ".join(argv),
        "git_commit": _git_commit(), "built_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "memories": n, "by_tag": dict(sorted(by_tag.items())),
        "by_task": {t: dict(sorted(c.items())) for t, c in sorted(by_task.items())},
        "episodes": len(episodes), "split": "train",
        "episodes_succeeded": sum(1 for e in episodes if e.get("final_score", 0) >= 100),
        "wall_seconds": round(sum(e.get("seconds", 0) for e in episodes), 1),
        "settings": progress.get("settings", {}), "clock": stream.latest_time,
        "export_bytes": export.stat().st_size,
    }
    (export.parent / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def merge_store(store: Path, other: Path) -> int:
    """Append `other`'s memories to `store` with their times shifted past `store`'s clock (one clock per
    store) and new ids; the episodes' progress lists are merged too. Plain memories only (no reflections)."""
    from memory_store import MemoryConfig

    from .amm.store import open_agent_store

    dst = open_agent_store(store, MemoryConfig(persist_dir=str(store)))
    src = open_agent_store(other, MemoryConfig(persist_dir=str(other)))
    mems, embs = src.memories(), src.embeddings()
    if any(m.evidence_ids for m in mems):
        raise ValueError(f"{other} holds reflections: merge stores of plain warm-up runs only")
    offset = float(int(dst.latest_time))
    dst.add_many([dict(description=m.description, now=m.created + offset, last_access=m.last_access + offset,
                       type=m.type, importance=m.importance, importance_source=m.importance_source,
                       importance_error=m.importance_error, tag=m.tag, task=m.task, episode=m.episode,
                       extra=m.extra) for m in mems], embs)
    mine, theirs = store / "warmup_progress.json", other / "warmup_progress.json"
    prog = json.loads(mine.read_text()) if mine.exists() else {"episodes": []}
    prog["episodes"] += json.loads(theirs.read_text())["episodes"] if theirs.exists() else []
    mine.write_text(json.dumps(prog, indent=1))
    return len(mems)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    store = Path(args.store).resolve()
    prog_path = store / "warmup_progress.json"
    progress = json.loads(prog_path.read_text()) if prog_path.exists() else {"episodes": []}
    if args.merge:
        n = merge_store(store, Path(args.merge).resolve())
        print(f"merged {n} memories from {args.merge} into {store}")
        return 0
    if args.export_only:
        if not args.export:
            print("error: --export-only needs --export PATH", file=sys.stderr)
            return 2
        m = write_export(store, Path(args.export), progress, progress.get("argv", argv))
        print(f"exported {m['memories']} memories to {args.export}")
        return 0
    # the user's options first, then what makes this a warm-up (an empty store of its own, train episodes)
    overrides = model_overrides(args) + ["amm.enabled=true", "amm.warmup=false", f"amm.store_dir={store}"]
    if not args.sage:
        overrides.append("controller.sage_enabled=false")
    if not args.reflect:
        overrides.append("amm.reflection=off")
    try:
        cfg = load_config(None, "amm", overrides)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from tqdm import tqdm

    from .controller import Agent, load_swift
    from .env import catalog
    from .llm import make_backend

    cat = catalog()
    names = [t.strip() for t in args.tasks.split(",") if t.strip()] or [t.name for t in cat.tasks]
    n_var = args.variations or cfg.amm.warmup_variations_per_task
    jobs = []
    for name in names:
        try:
            info = cat.get(name)
        except ValueError as e:  # an unknown task: say which ones exist, before any model is loaded
            print(f"error: {e}", file=sys.stderr)
            return 2
        jobs += [(info.name, v) for v in info.variations("train")[:n_var]]
    done = {(e["task"], e["variation"]) for e in progress["episodes"]}
    todo = [j for j in jobs if j not in done]
    progress["settings"] = {"sage": args.sage, "reflect": args.reflect, "variations_per_task": n_var,
                            "llm": f"{cfg.llm.backend}:{cfg.llm.embedded_model if cfg.llm.backend == 'embedded' else cfg.llm.model}"
                            if (args.sage or args.reflect) else "none"}
    progress["argv"] = argv
    print(f"warm-up: {len(jobs)} episodes ({len(jobs) - len(todo)} done before), store {store}", flush=True)
    swift = load_swift(cfg)
    llm = make_backend(cfg.llm, seed=cfg.seed)
    agent = Agent(cfg, swift, llm, runs_dir=ROOT / "runs" / "warmup" / "traces")
    try:
        for task, variation in tqdm(todo, desc="warm-up", unit="episode"):
            t0 = time.time()
            agent.start(task, variation, split="train")
            summary = agent.run()
            writes = summary.memory.get("writes", {}) if summary else {}
            progress["episodes"].append({"task": task, "variation": variation, "final_score": summary.final_score,
                                         "steps": summary.steps, "writes": writes,
                                         "reflection": summary.memory.get("reflection", ""),
                                         "seconds": round(time.time() - t0, 1), "trace": str(agent.trace_path)})
            store.mkdir(parents=True, exist_ok=True)
            prog_path.write_text(json.dumps(progress, indent=1))  # resumable after every episode
            tqdm.write(f"{task} v{variation}: score {summary.final_score:g} in {summary.steps} steps, "
                       f"writes {writes}")
    finally:
        agent.close()
    if args.export:
        m = write_export(store, Path(args.export), progress, argv)
        print(f"exported {m['memories']} memories ({m['by_tag']}) to {args.export}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
