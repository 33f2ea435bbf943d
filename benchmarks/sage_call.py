"""What one Sage call costs with the embedded model, and what it picks, on the same recorded Sage contexts.

    .venv/bin/python benchmarks/sage_call.py --capture 12          # record 12 Sage contexts (no LLM: a scripted one)
    .venv/bin/python benchmarks/sage_call.py --variants choose_turn=false choose_turn=true

Step 1 plays the Baseline on the first test variation of a few tasks with a scripted LLM (instant, always
"option 1") and records the `SageContext` of every Sage planning call (task, room, history, the valid actions,
Swift's ranking) to `benchmarks/results/sage_contexts.json`. Step 2 replays those contexts through Sage with
the embedded default model (Qwen2.5-Coder-1.5B, llama.cpp, `llm.n_threads`: all cores when idle), once per
variant (`sage.*` overrides, `;`-separated), variant by variant, and prints per variant the p50 of the plan, the
pick and the whole call, the plan's length, and where in the list the picks fell.
Run it with nothing else on the cores: llama.cpp uses both.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
CONTEXTS = ROOT / "benchmarks" / "results" / "sage_contexts.json"
TASKS = ("boil", "chemistry-mix", "melt", "grow-plant", "inclined-plane-determine-angle", "identify-life-stages-1",
         "power-component", "use-thermometer", "mendelian-genetics-known-plant", "find-non-living-thing")

PLAN = ("Q1: The objects needed are nearby.\nQ2: None.\nQ3: Look around and act.\nQ4: Act now.\nQ5: No mistake.")


def capture(n: int, step_limit: int) -> None:
    from agent_core.config import apply_overrides, preset
    from agent_core.controller import Agent, load_swift
    from agent_core.env import catalog
    from agent_core.llm.scripted import ScriptedBackend
    from agent_core.sage import Sage

    cfg = apply_overrides(preset("baseline"), [f"env.step_limit={step_limit}"])
    llm = ScriptedBackend(lambda p: PLAN if "Q5:" in p and "Commands the game accepts" not in p else "1")
    agent = Agent(cfg, load_swift(cfg), llm, runs_dir=Path(tempfile.mkdtemp(prefix="sage_call_")))
    got: list[dict] = []
    think = Sage.think

    def recording(self, ctx):
        if len(got) < n:
            got.append(dataclasses.asdict(ctx))
        return think(self, ctx)

    Sage.think = recording
    try:
        per_task = max(1, -(-n // len(TASKS)))
        for task in TASKS:
            before = len(got)
            agent.start(task, catalog().get(task).test[0], split="test")
            while not agent.done and len(got) - before < per_task and len(got) < n:
                agent.step()
            agent.finish()
            print(f"  {task}: {len(got) - before} contexts", flush=True)
            if len(got) >= n:
                break
    finally:
        Sage.think = think
        agent.close()
    CONTEXTS.write_text(json.dumps(got, indent=1))
    print(f"{len(got)} Sage contexts -> {CONTEXTS}")


def p50(xs):
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--capture", type=int, default=0, help="record this many Sage contexts first")
    ap.add_argument("--capture-step-limit", type=int, default=40)
    ap.add_argument("--variants", nargs="*", default=["choose_turn=false", "choose_turn=true"],
                    help="sage.* overrides per variant, ';' between several (e.g. 'choose_turn=true;plan_max_tokens=96')")
    ap.add_argument("--limit", type=int, default=None, help="replay only the first N contexts")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sage_call.json"))
    args = ap.parse_args()
    if args.capture:
        capture(args.capture, args.capture_step_limit)
    if args.variants:
        run_variants(args.variants, args.limit, Path(args.out))


def run_variants(variants: list[str], limit: int | None, out: Path) -> None:
    from agent_core.config import apply_overrides, preset
    from memory_store.embeddings import get_embedder
    from agent_core.llm import make_backend
    from agent_core.sage import Sage, SageContext

    ctxs = [SageContext(**c) for c in json.loads(CONTEXTS.read_text())][:limit]
    for c in ctxs:
        c.history = [tuple(h) for h in c.history]
        c.worked_examples = [(d, list(a)) for d, a in c.worked_examples]
    base = preset("baseline")
    llm = make_backend(base.llm)
    embedder = get_embedder(threads=base.memory.embedding_threads)
    sages = {v: Sage(llm, apply_overrides(base, [f"sage.{x.strip()}" for x in v.split(";") if x.strip()]).sage,
                     embedder) for v in variants}
    rows: dict[str, list[dict]] = {v: [] for v in variants}
    llm.chat("Say OK.", max_tokens=2)  # load the model before the clock starts
    # variant by variant, contexts in their recorded order: consecutive contexts come from the same episode, so
    # llama.cpp's cache holds what a run's previous Sage call left (the fixed start of the prompt), as in a run
    for v, sage in sages.items():
        for i, ctx in enumerate(ctxs):
            res = sage.think(ctx)
            calls = {c.purpose: c for c in res.llm_calls}
            pick = res.actions[0] if res.actions else None
            row = {"context": i, "task": ctx.task_name, "seconds": res.seconds, "error": res.error,
                   "plan_s": calls["plan"].latency_s if "plan" in calls else None,
                   "pick_s": calls["ground"].latency_s if "ground" in calls else None,
                   "plan_tokens_in": calls["plan"].prompt_tokens if "plan" in calls else None,
                   "plan_tokens_out": calls["plan"].completion_tokens if "plan" in calls else None,
                   "pick_tokens_in": calls["ground"].prompt_tokens if "ground" in calls else None,
                   # what llama.cpp read afresh: the prompt less what its cache held from the call before
                   "plan_prefilled": (calls["plan"].prompt_tokens - getattr(calls["plan"], "cached_tokens", 0)
                                      if "plan" in calls else None),
                   "pick_prefilled": (calls["ground"].prompt_tokens - getattr(calls["ground"], "cached_tokens", 0)
                                      if "ground" in calls else None),
                   "pick_tokens_out": calls["ground"].completion_tokens if "ground" in calls else None,
                   "n_options": len(res.options), "pick": pick,
                   "position": res.options.index(pick) + 1 if pick in res.options else None,
                   "plan": res.plan, "options": res.options,
                   "pick_reply": calls["ground"].output if "ground" in calls else None}
            rows[v].append(row)
            print(f"  [{i + 1}/{len(ctxs)}] {v}: {res.seconds:.1f} s (plan {row['plan_s'] or 0:.1f}, pick "
                  f"{row['pick_s'] or 0:.1f}), {row['plan_tokens_out']} plan tokens, option {row['position']} of {row['n_options']}: {pick!r}", flush=True)
    print("\n| variant | Sage call p50 | plan p50 | pick p50 | plan prompt tokens (p50) | plan tokens read afresh (p50) "
          "| plan tokens written (p50) | pick tokens read afresh (p50) | picks by position |")
    print("|---|---|---|---|---|---|---|---|---|")
    for v, rs in rows.items():
        ok = [r for r in rs if not r["error"]]
        pos = Counter(r["position"] for r in ok)
        print(f"| `{v}` | {p50([r['seconds'] for r in ok]):.1f} s | {p50([r['plan_s'] for r in ok]):.1f} s | "
              f"{p50([r['pick_s'] for r in ok]):.1f} s | {p50([r['plan_tokens_in'] for r in ok]):.0f} | "
              f"{p50([r['plan_prefilled'] for r in ok if r['plan_prefilled'] is not None]):.0f} | "
              f"{p50([r['plan_tokens_out'] for r in ok]):.0f} | "
              f"{p50([r['pick_prefilled'] for r in ok if r['pick_prefilled'] is not None]):.0f} | "
              + ", ".join(f"{k}: {n}" for k, n in sorted(pos.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))
              + " |")
    same = sum(1 for rs in zip(*rows.values()) if len({r["pick"] for r in rs}) == 1)
    print(f"\nthe same pick in every variant: {same} of {len(ctxs)} contexts")
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
