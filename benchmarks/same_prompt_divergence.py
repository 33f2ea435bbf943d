"""Where paired episodes part although the LLM was asked the same thing.

For each preset against the reference (Baseline) on the same task-variation, find the first step whose action
differs and compare the two steps' LLM calls in order: the first call whose prompt differs (the inputs parted:
a mechanism or an earlier output changed what the model was asked), or the first call with the same prompt and
another output (the model answered the same question differently: its numbers depend on what llama.cpp's cache
held, e.g. the previous episode's calls in the same worker), or no call at all (Swift or a rule parted them).

    .venv/bin/python benchmarks/same_prompt_divergence.py assets/evaluations/cpu-30x2x30 --presets amm srm full
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def steps(path: Path) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r.get("kind") == "step":
                out.append(r)
    return out


def first_parting(a: list[dict], b: list[dict]) -> tuple[str, int, dict]:
    """(kind, step, detail) for two episodes' step records."""
    for ra, rb in zip(a, b):
        calls_a, calls_b = ra.get("llm_calls") or [], rb.get("llm_calls") or []
        for ca, cb in zip(calls_a, calls_b):
            if ca["prompt"] != cb["prompt"]:
                return "prompt differs", ra["step"], {"purpose": ca["purpose"]}
            if ca["output"] != cb["output"]:
                return "same prompt, other output", ra["step"], {
                    "purpose": ca["purpose"], "cached": (ca.get("cached_tokens"), cb.get("cached_tokens"))}
        if len(calls_a) != len(calls_b):
            return "other calls", ra["step"], {"calls": ([c["purpose"] for c in calls_a],
                                                         [c["purpose"] for c in calls_b])}
        if ra["action"] != rb["action"]:
            return "no LLM difference", ra["step"], {}
    return "same", -1, {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("record", type=Path, help="an evaluation folder (with traces/<preset>/)")
    ap.add_argument("--presets", nargs="+", default=["amm", "srm", "full"])
    ap.add_argument("--reference", default="baseline")
    ap.add_argument("--list", action="store_true", help="print every pair")
    args = ap.parse_args()
    ref = args.record / "traces" / args.reference
    for preset in args.presets:
        kinds: Counter = Counter()
        purposes: Counter = Counter()
        for p in sorted((args.record / "traces" / preset).glob("*.jsonl")):
            q = ref / p.name.replace(f"-{preset}.jsonl", f"-{args.reference}.jsonl")
            if not q.exists():
                continue
            kind, step, detail = first_parting(steps(q), steps(p))
            kinds[kind] += 1
            if kind == "same prompt, other output":
                purposes[detail["purpose"]] += 1
            if args.list and kind != "same":
                print(f"  {preset} {p.name}: step {step}, {kind} {detail}")
        print(f"{preset}: {sum(kinds.values())} pairs; " + ", ".join(f"{k} {n}" for k, n in kinds.most_common())
              + (f"; same prompt by purpose: {dict(purposes)}" if purposes else ""))


if __name__ == "__main__":
    main()
