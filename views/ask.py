"""What the agent remembers of a recorded episode, as a Generative Agents memory stream a student can ask.

Generative Agents store every observation; the agent's own episodic memory (AMM) keeps only salient steps, and
a Baseline run keeps none. So for "ask about this episode" every step becomes one observation memory, in the
first person, with the reason the step record gives for it (the narration of views/narration.py): what was
done, who chose it and why, what the game answered, what the score did. Importance comes from the record: the
agent's own rating where AMM stored the step, else the salience gate's rule (agent_core/amm/salience.py),
else a mundane 2 (3 for a step Sage chose). Sage's plans are plan memories, the agent's reflections reflection
memories. Time is the step number, so recency favours the end of the episode, as it would for the agent.

The stream is written once per trace file (and its modification time) into a folder under the runs folder,
and reused."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from agent_core.amm.salience import StepFacts, importance, salience
from agent_core.config import AMMConfig
from agent_core.trace import EpisodeHeader, StepRecord
from memory_store import MemoryConfig, MemoryStream, open_stream
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


def episode_store_dir(trace: str | Path) -> Path:
    p = Path(trace)
    key = hashlib.sha1(f"{p.resolve()}|{p.stat().st_mtime_ns}".encode()).hexdigest()[:12]
    return sources.runs_dir() / "memory" / "ask" / f"{p.stem[:60]}-{key}"


def episode_stream(trace: str | Path, header: EpisodeHeader, records: list[StepRecord]) -> MemoryStream:
    """The episode's memory stream (written on first use, then reopened)."""
    where = episode_store_dir(trace)
    done = where / "complete"
    stream = open_stream(MemoryConfig(persist_dir=str(where)))
    if not done.exists():
        stream.reset()  # a half-written store from an interrupted build starts over
        stream.add_many(episode_memories(header, records))
        stream.flush()
        done.write_text(str(len(stream)))
    return stream


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
