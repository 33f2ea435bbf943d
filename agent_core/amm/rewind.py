"""Roll a memory store back to "after step k" of one run, for a resume.

Memories the run wrote that no kept step records (a half-finished step, a reflection after a stop) are removed;
the access times of the kept steps' retrievals are made good. Access times reach the disk only after their step's
record (the agent holds them during a step), so a kill in between loses them and never leaves a later one behind.
Ids are positional (`m{seq}`): removing the newest lets the redone write take the same id again.
"""
from __future__ import annotations

from typing import Any, Sequence

from memory_store import MemoryStream

from ..trace import StepRecord

TOUCHING = ("T1", "T2", "T3", "T4")  # retrievals that move their top memories' last access (critic evidence reuses one)


def rewind_store(stream: MemoryStream, run_id: str, steps: Sequence[StepRecord]) -> dict[str, Any]:
    stream.discard_unflushed()  # in this process, a failed step's held access times may still be pending
    kept = {w.id for rec in steps for w in rec.memories_written if w.id}
    extra = sorted((m for m in stream.memories() if m.episode == run_id and m.id not in kept),
                   key=lambda m: m.seq, reverse=True)
    removed = stream.delete([m.id for m in extra])
    touch: dict[str, float] = {}
    for rec in steps:
        if rec.replayed:  # a fork's copies of its parent's steps: their retrievals touched the parent's store
            continue
        for r in rec.retrievals:
            # a failed retrieval touched nothing; one whose formatting failed afterwards did
            if r.trigger in TOUCHING and r.result is not None and not (r.error or "").startswith("retrieval failed"):
                for i in r.result.top_ids:
                    touch[i] = max(touch.get(i, 0.0), float(r.result.now))
    fix = {}
    for i, t in touch.items():
        m = stream.get(i)
        if m is not None and m.last_access < t:
            fix[i] = t
    stream.set_access(fix)
    return {"removed": removed, "access_restored": len(fix)}
