"""How often the Ask page answers right, and how often an answer cites a memory that does not back it.

    .venv/bin/python benchmarks/ask_accuracy.py                          # embedded default + SmolLM2, 52 questions
    .venv/bin/python benchmarks/ask_accuracy.py --models smollm2-135m --limit 20

Questions with known answers are built from the typed step records of the shipped examples (assets/episodes) and
the shipped evaluation (assets/evaluations): who acted at step k (the actor and the action), what earned points
at step k (the action and the reward), what Gate-1 dropped at step k (the dropped text), which memory won at step
k (the memory id), why the agent went to a room it never entered ("never"), how the episode ended (the final
score). Each question is answered two ways with each model:

- records: the page's path. The step records answer it (views/ask_records.py) and the model only phrases that
  answer; a phrasing that loses a quoted action or a number is set aside for the records' own sentence.
- memories: the path every question took before. The episode's memory stream retrieves 5 memories and the model
  answers from them alone (memory_store/interview.py).

An answer is right when it contains every expected fact (case-insensitive). For the memories path, every answer
line that cites a memory is checked against it (`check_support`); the unsupported share is the lines not backed.
Answers are cached in benchmarks/results/ask_accuracy.jsonl (rerun resumes); the figures go to ask_accuracy.json.
Run it with nothing else on the cores: llama.cpp uses both.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("SWIFTSAGE_RUNS_DIR", str(Path.home() / ".cache" / "swiftsage-bench" / "ask-runs"))

from agent_core.actions import ROOMS  # noqa: E402
from agent_core.trace import list_traces, read_episode  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "ask_accuracy.json"
CACHE = ROOT / "benchmarks" / "results" / "ask_accuracy.jsonl"
ACTOR = {"swift": "swift", "sage": "sage", "critic": "critic"}


@dataclass
class Question:
    qid: str
    trace: str
    kind: str
    text: str
    facts: list[str] = field(default_factory=list)  # each must appear in a right answer


def _norm(text: str) -> str:
    """Lower case, words and numbers only (a sentence's full stop is not part of its last number)."""
    text = re.sub(r"\.(?!\d)", " ", text.lower())
    text = re.sub(r"(?<![\w.])\+(?=\d)", "", text)  # "+45 points" states the reward 45
    return " ".join(re.sub(r"[^a-z0-9+.\-]+", " ", text).split())


def right(answer: str, facts: list[str]) -> bool:
    a = f" {_norm(answer)} "
    return all(f" {_norm(f)} " in a for f in facts)


def questions(limit: int, seed: int = 0) -> list[Question]:
    rng = random.Random(seed)
    traces = list_traces(ROOT / "assets" / "episodes", ROOT / "assets" / "evaluations")
    out: list[Question] = []
    for path in sorted(traces):
        ep = read_episode(path, tolerant=True)
        rel = str(path.relative_to(ROOT))
        name = path.stem[-40:]
        steps = ep.steps
        if not steps:
            continue
        qs: list[Question] = []
        for system in ("sage", "swift", "critic"):
            pick = [r for r in steps if r.system == system and r.menu is None and len(r.action) <= 60]
            if pick:
                r = rng.choice(pick)
                qs.append(Question(f"{name}:actor:{r.step}", rel, "actor", f"Who acted at step {r.step} and why?",
                                   [ACTOR[system], r.action]))
        gains = [r for r in steps if r.reward > 0 and len(r.action) <= 60]
        if gains:
            r = rng.choice(gains)
            qs.append(Question(f"{name}:points:{r.step}", rel, "points", f"What earned you points at step {r.step}?",
                               [r.action, f"{r.reward:g}"]))
        drops = [(r, g) for r in steps for g in r.gate1 if g.decision == "DROP" and len(g.proposed) <= 60]
        if drops:
            r, g = rng.choice(drops)
            qs.append(Question(f"{name}:gate1:{r.step}", rel, "gate1", f"What did Gate-1 drop at step {r.step}?",
                               [" ".join(g.proposed.split())]))
        used = [(r, x) for r in steps for x in r.retrievals if x.injected_ids and not x.error and x.result]
        if used:
            r, x = rng.choice(used)
            qs.append(Question(f"{name}:memory:{r.step}", rel, "memory", f"Which memory won at step {r.step}?",
                               [x.injected_ids[0]]))
        seen = {r.room for r in steps} | {r.action.split(" to ", 1)[-1] for r in steps if " to " in r.action}
        never = [room for room in ROOMS if room not in seen]
        if never:
            room = rng.choice(never)
            qs.append(Question(f"{name}:never:{room}", rel, "never", f"Why did you go to the {room}?", ["never"]))
        if ep.summary is not None:
            qs.append(Question(f"{name}:outcome", rel, "outcome", "How did the episode end?",
                               [f"{ep.summary.final_score:g}"]))
        out.extend(qs)
    rng.shuffle(out)
    # every kind represented: take round-robin over the kinds
    by_kind: dict[str, list[Question]] = {}
    for q in out:
        by_kind.setdefault(q.kind, []).append(q)
    picked: list[Question] = []
    while len(picked) < limit and any(by_kind.values()):
        for k in sorted(by_kind):
            if by_kind[k] and len(picked) < limit:
                picked.append(by_kind[k].pop())
    return picked


def _cached() -> dict[tuple[str, str, str], dict]:
    done: dict[tuple[str, str, str], dict] = {}
    if CACHE.exists():
        for line in CACHE.read_text().splitlines():
            try:
                d = json.loads(line)
            except ValueError:
                continue
            done[(d["model"], d["mode"], d["qid"])] = d
    return done


def answer(q: Question, mode: str, model: str, llm) -> dict:
    from memory_store.interview import ANSWER_MAX_TOKENS, STOP, answer_question, phrase_facts, retrieve_for_question
    from views.ask import episode_stream, step_memory_ids
    from views.ask_records import answer_from_records

    ep = read_episode(ROOT / q.trace, tolerant=True)
    stream = episode_stream(ep.header, ep.steps)
    gen = lambda p: llm.chat(p, max_tokens=ANSWER_MAX_TOKENS, stop=list(STOP)).text  # noqa: E731
    t0 = time.perf_counter()
    if mode == "records":
        exact = answer_from_records(q.text, ep.header, ep.steps, ep.summary)
        if exact is None:
            return {"text": "", "routed": False, "seconds": 0.0, "support": []}
        ids = step_memory_ids(stream)
        ans = phrase_facts(q.text, exact.text, exact.keep(), [ids[s] for s in exact.steps if s in ids], gen,
                           model=model)
        return {"text": ans.text, "routed": True, "phrased": ans.phrasing.startswith("phrased"),
                "seconds": round(time.perf_counter() - t0, 2), "support": ans.support}
    ans = answer_question(q.text, retrieve_for_question(stream, q.text, k=5), gen, model=model)
    return {"text": ans.text or ans.raw, "error": ans.error, "seconds": round(time.perf_counter() - t0, 2),
            "support": ans.support, "cited": ans.cited}


def summarise(rows: list[dict]) -> dict:
    n = len(rows)
    lines = [s for r in rows for s in r.get("support", []) if s.get("cited") and s.get("source") == "memories"]
    out = {"questions": n, "right": sum(r["right"] for r in rows), "accuracy": round(sum(r["right"] for r in rows) / n, 3)
           if n else None, "by_kind": {}}
    for k in sorted({r["kind"] for r in rows}):
        sub = [r for r in rows if r["kind"] == k]
        out["by_kind"][k] = f"{sum(r['right'] for r in sub)}/{len(sub)}"
    if lines:
        out["cited_lines"] = len(lines)
        out["unsupported_share"] = round(sum(not s["supported"] for s in lines) / len(lines), 3)
    if any("phrased" in r for r in rows):
        out["phrased_share"] = round(sum(bool(r.get("phrased")) for r in rows) / n, 3)
        out["routed_share"] = round(sum(bool(r.get("routed")) for r in rows) / n, 3)
    secs = sorted(r["seconds"] for r in rows)
    out["p50_seconds"] = secs[len(secs) // 2] if secs else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["qwen2.5-coder-1.5b", "smollm2-135m"])
    ap.add_argument("--modes", nargs="+", default=["records", "memories"], choices=["records", "memories"])
    ap.add_argument("--limit", type=int, default=52)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    from agent_core.config import LLMConfig
    from agent_core.llm import make_backend

    qs = questions(args.limit)
    done = _cached()
    results: dict = {"questions": len(qs), "kinds": sorted({q.kind for q in qs}), "runs": {}}
    for model in args.models:
        llm = make_backend(LLMConfig(backend="embedded", embedded_model=model, n_threads=args.threads,
                                     timeout_s=300.0))
        for mode in args.modes:
            rows = []
            for i, q in enumerate(qs, 1):
                row = done.get((model, mode, q.qid))
                if row is not None:
                    row["right"] = right(row["text"], q.facts)  # scored again: the rule may have changed
                else:
                    row = {"model": model, "mode": mode, "qid": q.qid, "kind": q.kind, "question": q.text,
                           "facts": q.facts, **answer(q, mode, model, llm)}
                    row["right"] = right(row["text"], q.facts)
                    with CACHE.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
                rows.append(row)
                print(f"{model} {mode} {i}/{len(qs)} {'ok ' if row['right'] else 'BAD'} {q.text} -> "
                      f"{row['text'][:100]!r}", flush=True)
            results["runs"][f"{model} / {mode}"] = summarise(rows)
    OUT.write_text(json.dumps(results, indent=1) + "\n")
    for k, v in results["runs"].items():
        print(k, json.dumps(v))


if __name__ == "__main__":
    main()
