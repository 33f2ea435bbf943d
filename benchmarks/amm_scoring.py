"""How much the Generative Agents score changes what AMM injects, against relevance alone.

    .venv/bin/python benchmarks/amm_scoring.py TRACE_DIR [TRACE_DIR ...]

Reads the T1 / T4 retrievals recorded in `amm` traces (e.g. the temporary folders of
`benchmarks/srm_swift.py --variant swift-amm`, printed at its start) and re-ranks each one's recorded
candidates with relevance only (`amm.scoring = "relevance"`: weights 0 / 0 / 1). The recorded candidates
are the whole normalization set when it holds at most 64 memories (`memory.max_recorded_candidates`), so
the re-ranking is exact there; larger sets are skipped. Prints how often the top 3 (T1) / top 5 (T4) differ.
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from agent_core.trace import TraceError, read_episode  # noqa: E402

RELEVANCE = {"recency": 0.0, "importance": 0.0, "relevance": 1.0}
TOP = {"T1": 3, "T4": 5}


def main(dirs: list[str]) -> None:
    seen, differ, overlap, skipped = Counter(), Counter(), Counter(), 0
    tag_ga, tag_rel = Counter(), Counter()
    for d in dirs:
        for path in sorted(Path(d).glob("*.jsonl")):
            try:
                ep = read_episode(path)
            except TraceError:
                continue
            for r in ep.steps:
                for x in r.retrievals:
                    if x.trigger not in TOP or x.result is None or not x.result.candidates:
                        continue
                    res, k = x.result, TOP[x.trigger]
                    if res.eligible > len(res.candidates):
                        skipped += 1
                        continue
                    ga = [c.id for c in res.top[:k]]
                    rel = [c.id for c in res.rerank(RELEVANCE, k=k)]
                    seen[x.trigger] += 1
                    differ[x.trigger] += set(ga) != set(rel)
                    overlap[x.trigger] += len(set(ga) & set(rel)) / max(1, len(ga))
                    tag_ga.update(c.tag for c in res.top[:k])
                    by_id = {c.id: c for c in res.candidates}
                    tag_rel.update(by_id[i].tag for i in rel)
    for t in sorted(seen):
        print(f"{t}: {seen[t]} retrievals; top {TOP[t]} differs from relevance-only in {differ[t]} "
              f"({differ[t] / seen[t]:.0%}); mean overlap {overlap[t] / seen[t]:.0%}")
    print(f"tags in the GA top-k: {dict(tag_ga)}; in the relevance-only top-k: {dict(tag_rel)}")
    print(f"skipped (normalization set larger than the recorded candidates): {skipped}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["runs"])
