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
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.evaluate.paired import first_divergence  # noqa: E402
from agent_core.trace import StepRecord, read_episode  # noqa: E402


def first_parting(a: list[StepRecord], b: list[StepRecord]) -> tuple[str, int, dict]:
    """(kind, step, detail) for two episodes' step records: the first LLM call that differs, up to and including
    the step where their actions first differ (paired.first_divergence)."""
    last = first_divergence(a, b)
    if last is None:
        return "same", -1, {}
    for ra, rb in zip(a[:last], b[:last]):
        for ca, cb in zip(ra.llm_calls, rb.llm_calls):
            if ca.prompt != cb.prompt:
                return "prompt differs", ra.step, {"purpose": ca.purpose}
            if ca.output != cb.output:
                return "same prompt, other output", ra.step, {"purpose": ca.purpose,
                                                               "cached": (ca.cached_tokens, cb.cached_tokens)}
        if len(ra.llm_calls) != len(rb.llm_calls):
            return "other calls", ra.step, {"calls": ([c.purpose for c in ra.llm_calls],
                                                      [c.purpose for c in rb.llm_calls])}
    return "no LLM difference", last, {}


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
            kind, step, detail = first_parting(read_episode(q).steps, read_episode(p).steps)
            kinds[kind] += 1
            if kind == "same prompt, other output":
                purposes[detail["purpose"]] += 1
            if args.list and kind != "same":
                print(f"  {preset} {p.name}: step {step}, {kind} {detail}")
        print(f"{preset}: {sum(kinds.values())} pairs; " + ", ".join(f"{k} {n}" for k, n in kinds.most_common())
              + (f"; same prompt by purpose: {dict(purposes)}" if purposes else ""))


if __name__ == "__main__":
    main()
