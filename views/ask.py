"""What the agent remembers of a recorded episode, as a Generative Agents memory stream a student can ask.

Generative Agents store every observation; the agent's own episodic memory (AMM) keeps only salient steps, and
a Baseline run keeps none. So for "ask about this episode" every step becomes one observation memory, in the
first person, with the reason the step record gives for it (the narration of views/narration.py): what was
done, who chose it and why, what the game answered, what the score did. Importance comes from the record: the
agent's own rating where AMM stored the step, else the salience gate's rule (agent_core/amm/salience.py),
else a mundane 2 (3 for a step Sage chose). Sage's plans are plan memories, the agent's reflections reflection
memories. Time is the step number, so recency favours the end of the episode, as it would for the agent.

The stream is keyed by the episode's content (a digest of its header), written once under the runs folder
(runs/memory/ask/) and reused: a live trace's store is extended with the steps written since, never rebuilt, and
a trace whose steps changed (a resumed run rewrites its tail) is written again. At most OPEN_STORES are open at
once (the least recently asked is closed) and the folder is kept under a disk budget (the least recently asked
stores are deleted first), so visitors asking about many episodes cost bounded memory and disk."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from agent_core.amm.salience import StepFacts, importance, salience
from agent_core.config import AMMConfig
from agent_core.trace import Episode, EpisodeHeader, StepRecord, read_episode
from memory_store import MemoryConfig, MemoryStream, close_stream, open_stream
from views import sources
from views.narration import actor_sentence

MUNDANE, SAGE_STEP, PLAN = 2.0, 3.0, 4.0


def _clip(text: str, n: int = 160) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 3] + "..."


def step_memory(header: EpisodeHeader, rec: StepRecord, score_before: float) -> dict[str, Any]:
    why = actor_sentence(rec, header)
    delta = rec.score - score_before
    score = (f"The score went from {score_before:g} to {rec.score:g}." if delta else f"The score stayed at {rec.score:g}.")
    text = (f"Step {rec.step}, in the {rec.room or 'room'}: I did '{rec.action}'. Why: {why} "
            f"The game said: \"{_clip(rec.observation)}\" {score}")
    own = next((w for w in rec.memories_written if w.type == "observation" and w.id), None)
    if own is not None:
        imp, tag, src = own.importance, own.tag, "the agent's own memory (AMM)"
    else:
        facts = StepFacts(task=header.task, task_description=header.task_description, variation=header.variation,
                          room=rec.room, inventory=rec.inventory, action=rec.action, observation=rec.observation,
                          reward=rec.reward, score_before=score_before, score_after=rec.score, done=rec.done)
        s = salience(facts, AMMConfig())
        if s is not None:
            imp, tag, src = importance(s, facts, AMMConfig()), s.tag, f"salience rule {s.rule}"
        else:
            imp, tag, src = (SAGE_STEP if rec.system == "sage" else MUNDANE), "", "mundane step"
    return dict(description=text, now=float(rec.step), type="observation", importance=imp, tag=tag,
                task=header.task, episode=header.run_id, importance_source="given",
                extra={"step": rec.step, "system": rec.system, "importance_from": src})


def episode_memories(header: EpisodeHeader, records: list[StepRecord]) -> list[dict[str, Any]]:
    """The items of `MemoryStream.add_many` for one recorded episode, oldest first."""
    items: list[dict[str, Any]] = []
    score, plan = 0.0, {}
    for rec in records:
        items.append(step_memory(header, rec, score))
        if rec.plan and rec.plan != plan:
            plan = dict(rec.plan)
            text = "My plan at step {}: ".format(rec.step) + " ".join(f"{k}: {_clip(v, 120)}" for k, v in plan.items())
            items.append(dict(description=text, now=float(rec.step), type="plan", importance=PLAN, tag="plan",
                              task=header.task, episode=header.run_id, importance_source="given",
                              extra={"step": rec.step}))
        for w in rec.memories_written:
            if w.type == "reflection" and w.text:
                items.append(dict(description=w.text, now=float(rec.step), type="reflection",
                                  importance=w.importance or 5.0, tag=w.tag, task=header.task,
                                  episode=header.run_id, importance_source="given", extra={"step": rec.step}))
        score = rec.score
    return items


log = logging.getLogger("swiftsage.ask")
OPEN_STORES = 8  # episode stores open at once (each holds a Chroma client and its index in memory)
META = "complete"  # in a store folder: what is in it (JSON), rewritten after every write


def disk_budget_bytes() -> int:
    """How much the Ask stores may take on disk together (SWIFTSAGE_ASK_STORE_MB, default 1024 MB)."""
    try:
        return int(float(os.environ.get("SWIFTSAGE_ASK_STORE_MB") or 1024) * 2**20)
    except ValueError:
        return 1024 * 2**20


def ask_root() -> Path:
    return sources.runs_dir() / "memory" / "ask"


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def episode_store_dir(header: EpisodeHeader) -> Path:
    """The store of an episode: named by a digest of its header (the same episode under another file name or a copy
    shares it; the run id keeps the name readable)."""
    key = _digest(dataclasses.asdict(header))[:16]
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in header.run_id)[:60] or "episode"
    return ask_root() / f"{name}-{key}"


_open: OrderedDict[str, MemoryStream] = OrderedDict()  # store folder -> stream, most recently asked last
_locks: dict[str, threading.Lock] = {}
_open_lock = threading.Lock()


def _lock_for(where: Path) -> threading.Lock:
    with _open_lock:
        return _locks.setdefault(str(where), threading.Lock())


def _stream(where: Path) -> MemoryStream:
    with _open_lock:
        stream = _open.pop(str(where), None)
        if stream is None:
            stream = open_stream(MemoryConfig(persist_dir=str(where)))
        _open[str(where)] = stream
        while len(_open) > OPEN_STORES:
            old, gone = _open.popitem(last=False)
            close_stream(gone)
            log.info("closed the Ask store %s (more than %d open)", Path(old).name, OPEN_STORES)
        return stream


def open_stores() -> list[str]:
    with _open_lock:
        return list(_open)


def episode_stream(header: EpisodeHeader, records: list[StepRecord]) -> MemoryStream:
    """The episode's memory stream: written on first use, extended by the steps added since (a live trace), written
    again when the recorded steps changed, then reopened; the disk budget is kept after every write."""
    where = episode_store_dir(header)
    items = episode_memories(header, records)
    with _lock_for(where):
        stream = _stream(where)
        meta_path = where / META
        try:
            meta = json.loads(meta_path.read_text())
            have = int(meta["items"])
            same = have <= len(items) and meta["digest"] == _digest(items[:have]) and len(stream) == meta["memories"]
        except (OSError, ValueError, KeyError, TypeError):
            have, same = 0, False
        if not same:  # new, half-written by an interrupted build, or the trace's steps changed: start over
            stream.reset()
            have = 0
        if have < len(items) or not same:
            stream.add_many(items[have:])
            stream.flush()
            meta_path.write_text(json.dumps({"items": len(items), "digest": _digest(items), "memories": len(stream)}))
            keep_disk_budget(protect=where)
        else:
            os.utime(meta_path)  # asked again: the most recently used
    return stream


def _size(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def keep_disk_budget(protect: Path | None = None) -> list[str]:
    """Delete the least recently asked stores until all fit the disk budget; an open store is closed first, and the
    one just written (`protect`) is kept even alone over the budget. Returns the names deleted."""
    root = ask_root()
    if not root.is_dir():
        return []
    stores = []
    for d in root.iterdir():
        if d.is_dir() and not d.is_symlink():
            try:
                used = (d / META).stat().st_mtime
            except OSError:
                used = 0.0  # never finished: the first to go
            stores.append((used, d, _size(d)))
    total, budget, deleted = sum(s for _, _, s in stores), disk_budget_bytes(), []
    for _, d, size in sorted(stores, key=lambda x: x[0]):
        if total <= budget:
            break
        if protect is not None and d.resolve() == protect.resolve():
            continue
        if not _lock_for(d).acquire(blocking=False):
            continue  # being written or extended right now
        try:
            with _open_lock:
                stream = _open.pop(str(d), None)
            if stream is not None:
                close_stream(stream)
            shutil.rmtree(d, ignore_errors=True)
        finally:
            _lock_for(d).release()
        total -= size
        deleted.append(d.name)
    if deleted:
        log.info("deleted %d Ask stores to keep %s under %d MB", len(deleted), root, budget // 2**20)
    return deleted


_episodes: OrderedDict[tuple, Episode] = OrderedDict()


def read_for_ask(trace: str | Path) -> Episode:
    """The episode as written so far (tolerant of a half-written last line), parsed once per file state."""
    p = Path(trace)
    st_ = p.stat()
    key = (str(p), st_.st_mtime_ns, st_.st_size)
    with _open_lock:
        if key in _episodes:
            _episodes.move_to_end(key)
            return _episodes[key]
    ep = read_episode(p, tolerant=True)
    with _open_lock:
        _episodes[key] = ep
        while len(_episodes) > 32:
            _episodes.popitem(last=False)
    return ep


def suggested_questions(header: EpisodeHeader, records: list[StepRecord]) -> list[str]:
    """Questions a student might ask about this episode, from its records: the first step Sage chose, the
    first focus, the biggest score gain, and what the agent knows about the task."""
    out: list[str] = []
    sage = next((r for r in records if r.system == "sage"), None)
    if sage is not None:
        out.append(f"Why did Sage take over at step {sage.step}?")
    focus = next((r for r in records if r.action.startswith("focus on")), None)
    if focus is not None:
        out.append(f"Why did you {focus.action}?")
    gains = [r for r in records if r.reward > 0 and r is not focus]
    if gains:
        out.append(f"What earned you points at step {max(gains, key=lambda r: r.reward).step}?")
    out.append(f"What did you learn about the task '{header.task}'?")
    return out[:4]


def step_memory_ids(stream: MemoryStream) -> dict[int, str]:
    """Step number -> the id of that step's memory in an episode's stream (`episode_memories` writes one each)."""
    return {int(m.extra["step"]): m.id for m in stream.memories()
            if m.type == "observation" and isinstance(m.extra, dict) and "step" in m.extra}
