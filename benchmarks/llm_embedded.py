"""Throughput of the embedded models on a Sage-sized planning prompt, and a sample of each plan.

    .venv/bin/python benchmarks/llm_embedded.py [--models qwen2.5-coder-1.5b smollm2-135m] [--repeats 2]

Prompt tokens/s = prompt tokens / time to first token; generation tokens/s from the rest.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

import argparse
import statistics
import time

from agent_core.llm.embedded import MODELS, EmbeddedBackend

PROMPT = """You are helping an agent in ScienceWorld, a text game about elementary science.
Task: Your task is to boil water. For compounds without a boiling point, combusting the substance is also
acceptable. First, focus on the substance. Then, take actions that will cause it to change its state of matter.
Current room: kitchen. In it, you see: a stove (turned off), a sink (turned off), a cupboard (open) containing
a metal pot, a fridge, a counter with a bowl, a thermometer. Inventory: nothing.
Recent actions: teleport to kitchen --> You teleport to the kitchen. | look around --> (the room above)
Answer briefly:
Q1. Which objects are needed and where are they likely to be?
Q2. Which of them are not collected yet?
Q3. Which subgoals complete the task efficiently?
Q4. Which subgoals are done, and which one to focus on now?
Q5. Is a mistake blocking progress, and how to fix it?"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=160)
    args = ap.parse_args()
    for key in args.models:
        be = EmbeddedBackend(key, n_threads=2)
        t0 = time.perf_counter()
        be._load()
        load_s = time.perf_counter() - t0
        llm = be._llm
        pp, tg, samples = [], [], []
        for r in range(args.repeats):
            llm.reset()  # no prompt cache between repeats: measure prompt processing for real
            t0 = time.perf_counter()
            first = None
            text = ""
            n_gen = 0
            for chunk in llm.create_chat_completion(messages=[{"role": "user", "content": PROMPT}],
                                                    max_tokens=args.max_tokens, temperature=0.0, stream=True):
                delta = chunk["choices"][0]["delta"].get("content")
                if delta:
                    if first is None:
                        first = time.perf_counter()
                    n_gen += 1
                    text += delta
            end = time.perf_counter()
            n_prompt = len(llm.tokenize(PROMPT.encode()))  # the chat template adds a few more
            pp.append(n_prompt / (first - t0))
            tg.append((n_gen - 1) / (end - first) if n_gen > 1 else 0.0)
            samples.append(text)
        print(f"== {MODELS[key].title}: load {load_s:.1f} s, prompt ~{statistics.median(pp):.0f} tok/s, "
              f"generation ~{statistics.median(tg):.1f} tok/s (median of {args.repeats})")
        print(samples[0][:700].strip())
        print()


if __name__ == "__main__":
    main()
