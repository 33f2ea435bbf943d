"""The SwiftSage loop (SPEC.md section 4): Swift acts until a trigger hands control to Sage, whose
action buffer runs FIFO until it is empty or its actions fail several times in a row.

Every environment step produces exactly one `StepRecord`, written to the trace before the next step
starts. The app drives an `Agent` one `step()` at a time and never reaches into it otherwise.
"""
from __future__ import annotations

import gzip
import json
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Protocol, Sequence

from .config import Config
from .env import Observation, ScienceWorld
from .llm import LLMBackend
from .sage import Sage, SageContext, map_action
from .swift.format import HistoryStep, SwiftState, swift_input
from .swift.loop_guard import STREAK, apply_loop_guard
from .swift.model import SwiftProposal
from .trace import (EpisodeHeader, EpisodeSummary, StepRecord, SwiftCandidate, TraceWriter, Trigger)

ROOT = Path(__file__).resolve().parents[1]
RUNS_DIR = ROOT / "runs"
GOLD_PACK = ROOT / "assets" / "swift" / "gold_trajectories.jsonl.gz"


class SwiftPolicy(Protocol):
    name: str

    def propose(self, state: SwiftState, valid_actions: Sequence[str]) -> SwiftProposal: ...


class ModelSwift:
    """The trained Swift model behind the controller's interface."""

    def __init__(self, model, k: int = 10, n: int = 5, loop_guard: bool = True, loop_guard_streak: int = STREAK):
        self.model, self.k, self.n, self.loop_guard = model, k, n, loop_guard
        self.loop_guard_streak = loop_guard_streak
        self.name = model.name

    def propose(self, state: SwiftState, valid_actions: Sequence[str]) -> SwiftProposal:
        prop = self.model.propose(swift_input(state, self.k), valid_actions, self.n)
        return apply_loop_guard(prop, state.history, self.loop_guard_streak) if self.loop_guard else prop


class ScriptedSwift:
    """Replays fixed proposals (deterministic tests and demos of the switching rules)."""

    name = "scripted-swift"

    def __init__(self, actions: Sequence[str] | Callable[[SwiftState, Sequence[str]], str]):
        self._fn = actions if callable(actions) else None
        self._items = list(actions) if not callable(actions) else []

    def propose(self, state: SwiftState, valid_actions: Sequence[str]) -> SwiftProposal:
        if self._fn:
            a = self._fn(state, valid_actions)
        else:
            a = self._items.pop(0) if self._items else "look around"
        ok = a in set(valid_actions)
        return SwiftProposal(top1=a, candidates=[(a, 0.0)], valid_ranked=[(a, 0.0)] if ok else [],
                             action=a if ok else (valid_actions[0] if valid_actions else a))


def load_swift(cfg: Config) -> SwiftPolicy:
    from .swift.model import SwiftModel, default_threads

    model = SwiftModel(ROOT / cfg.swift.checkpoint_dir / "model", threads=default_threads(),
                       max_input_tokens=cfg.swift.max_input_tokens, max_output_tokens=cfg.swift.max_output_tokens)
    sc = cfg.swift
    return ModelSwift(model, sc.history_k, sc.num_candidates, sc.loop_guard, sc.loop_guard_streak)


_GOLD_CACHE: dict[str, list[tuple[str, list[str]]]] = {}


def worked_examples(task: str, exclude_variation: int | None = None, n: int = 1) -> list[tuple[str, list[str]]]:
    """Train gold trajectories of the same task (shortest first), for Sage's grounding prompt."""
    if not _GOLD_CACHE and GOLD_PACK.exists():
        with gzip.open(GOLD_PACK, "rt", encoding="utf-8") as fh:
            for line in fh:
                t = json.loads(line)
                if t["split"] == "train":
                    _GOLD_CACHE.setdefault(t["task"], []).append(
                        (t["variation"], t["task_description"], [s["action"] for s in t["steps"]]))
    rows = sorted((r for r in _GOLD_CACHE.get(task, []) if r[0] != exclude_variation), key=lambda r: len(r[2]))
    return [(d, a) for _v, d, a in rows[:n]]


@dataclass
class AgentState:
    mode: str = "swift"  # swift | sage
    buffer: deque = field(default_factory=deque)
    buffer_failures: int = 0
    rewards: list[float] = field(default_factory=list)
    steps_since_sage: int = 0
    plan: dict[str, str] = field(default_factory=dict)
    swift_state: SwiftState | None = None
    sage_history: list[tuple[str, str]] = field(default_factory=list)


class Agent:
    """One episode at a time: `start()`, then `step()` until `done`, then `finish()`."""

    def __init__(self, cfg: Config, swift: SwiftPolicy, llm: LLMBackend, env: ScienceWorld | None = None,
                 runs_dir: str | Path = RUNS_DIR, embedder=None):
        self.cfg = cfg
        self.swift = swift
        self.llm = llm
        self.sage = Sage(llm, cfg.sage)
        self.env = env or ScienceWorld(cfg.env)
        self.runs_dir = Path(runs_dir)
        self._embedder = embedder
        self.writer: TraceWriter | None = None
        self.state = AgentState()
        self.last: Observation | None = None
        self.records: list[StepRecord] = []
        self.summary: EpisodeSummary | None = None

    # ------------------------------------------------------------ lifecycle
    @property
    def embedder(self):
        if self._embedder is None:
            from memory_store.embeddings import get_embedder

            self._embedder = get_embedder(threads=self.cfg.memory.embedding_threads)
        return self._embedder

    @property
    def done(self) -> bool:
        return self.last is not None and self.last.done

    @property
    def trace_path(self) -> Path | None:
        return self.writer.path if self.writer else None

    def start(self, task: str | int, variation: int, split: str | None = "test") -> EpisodeHeader:
        self.finish("stopped")
        obs = self.env.reset(task, variation, split=split)
        info = self.env.task
        self.last = obs
        self.records, self.summary = [], None
        self.state = AgentState(swift_state=SwiftState(task_description=obs.task_description, score=obs.score,
                                                       look=obs.look, inventory=obs.inventory, start_room=obs.room))
        self._examples = worked_examples(info.name, variation, self.cfg.sage.worked_examples)
        run_id = f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{info.name}-v{variation}-{self.cfg.preset}-" \
                 f"{uuid.uuid4().hex[:6]}"
        header = EpisodeHeader(task=info.name, task_index=info.index, variation=variation, split=self.env.split or "",
                               task_description=obs.task_description, config=self.cfg.to_dict(),
                               models={"swift": self.swift.name, "sage": f"{self.llm.name}:{self.llm.model}"},
                               seed=self.cfg.seed, run_id=run_id, initial_observation=obs.text,
                               initial_look=obs.look, initial_inventory=obs.inventory)
        self.writer = TraceWriter(self.runs_dir / f"{run_id}.jsonl", header)
        return header

    def finish(self, reason: str | None = None, error: str | None = None) -> EpisodeSummary | None:
        if self.writer is None or self.writer.closed:
            return self.summary
        last = self.last
        if reason is None:
            reason = ("success" if last.score >= 100 else "failure" if last.failed else
                      "step_limit" if last.done else "stopped")
        self.summary = EpisodeSummary(final_score=last.score if last else 0.0, success=bool(last and last.score >= 100),
                                      failed=bool(last and last.failed), steps=len(self.records), reason=reason,
                                      error=error)
        self.writer.close(self.summary)
        return self.summary

    def close(self) -> None:
        self.finish("stopped")
        self.env.close()

    def run(self, max_steps: int | None = None, on_step: Callable[[StepRecord], None] | None = None) -> EpisodeSummary:
        n = 0
        while not self.done and (max_steps is None or n < max_steps):
            rec = self.step()
            n += 1
            if on_step:
                on_step(rec)
        return self.finish() if self.done else self.summary  # type: ignore[return-value]

    # ------------------------------------------------------------ triggers
    def _triggers(self, prop: SwiftProposal, valid: set[str]) -> list[Trigger]:
        cc = self.cfg.controller
        out: list[Trigger] = []
        if prop.top1 not in valid:
            out.append(Trigger("invalid", "invalid: Swift's action is not valid in the current state",
                               {"swift_top1": prop.top1}))
        if prop.action.startswith(cc.critical_prefixes) or prop.top1.startswith(cc.critical_prefixes):
            out.append(Trigger("critical", "critical: 'focus on ...' is a key decision that can end the task",
                               {"swift_action": prop.action}))
        last_text = (self.last.text if self.last else "").lower()
        hits = [m for m in cc.unexpected_markers if m in last_text]
        if self.records and hits:
            out.append(Trigger("unexpected", "unexpected: the last observation reports a failure or anomaly",
                               {"markers": hits, "observation": self.last.text[:300]}))
        w = cc.stuck_window
        recent = self.state.rewards[-w:]
        if self.state.steps_since_sage >= w and len(recent) == w and sum(recent) == 0:
            out.append(Trigger("stuck", f"stuck: the rewards of the last {w} steps sum to 0", {"rewards": recent}))
        return out

    # ------------------------------------------------------------ one step
    def _sage_context(self) -> SageContext:
        ss = self.state.swift_state
        return SageContext(task=ss.task_description, look=ss.look, inventory=ss.inventory, score=ss.score,
                           time=ss.time, history=self.state.sage_history, task_name=self.env.task.name,
                           worked_examples=self._examples)

    def _next_buffered(self, valid: Sequence[str], mappings: list, notes: list[str]) -> str | None:
        """Pop buffered actions until one maps onto a valid action; unmappable ones count as failures."""
        while self.state.buffer:
            raw = self.state.buffer.popleft()
            m = map_action(raw, valid, self.cfg.sage.map_similarity_threshold, self.embedder)
            mappings.append(m)
            if m.mapped is not None:
                return m.mapped
            self.state.buffer_failures += 1
            notes.append(f"buffered action {raw!r} matches no valid action (best similarity {m.similarity})")
            if self.state.buffer_failures >= self.cfg.controller.buffer_fail_limit:
                notes.append(f"{self.state.buffer_failures} buffered actions failed in a row: back to Swift")
                self.state.buffer.clear()
                break
        return None

    def step(self) -> StepRecord:
        if self.writer is None or self.last is None:
            raise RuntimeError("start(task, variation) first")
        if self.done:
            raise RuntimeError("the episode is over")
        t_all = time.perf_counter()
        timings: dict[str, float] = {}
        st = self.state
        t0 = time.perf_counter()
        valid = self.env.valid_actions()
        valid_set = set(valid)
        timings["valid_actions"] = time.perf_counter() - t0
        buffer_before = list(st.buffer)
        mappings, notes, llm_calls = [], [], []
        trigger: Trigger | None = None
        prop: SwiftProposal | None = None
        plan = dict(st.plan)
        action: str | None = None
        system = "swift"

        if st.mode == "sage" and st.buffer:
            action = self._next_buffered(valid, mappings, notes)
            if action is not None:
                system = "sage"
        if action is None:
            if st.mode == "sage":
                trigger = Trigger("buffer_empty" if st.buffer_failures < self.cfg.controller.buffer_fail_limit
                                  else "buffer_failed",
                                  "back to Swift: the action buffer is empty" if st.buffer_failures <
                                  self.cfg.controller.buffer_fail_limit else
                                  f"back to Swift: {self.cfg.controller.buffer_fail_limit} buffered actions failed "
                                  f"in a row", {"buffer_failures": st.buffer_failures})
                st.mode, st.buffer_failures = "swift", 0
                st.buffer.clear()
            t0 = time.perf_counter()
            prop = self.swift.propose(st.swift_state, valid)
            timings["swift"] = time.perf_counter() - t0
            if prop.guard:
                notes.append(f"Swift loop guard: {prop.guard}")
            fired = self._triggers(prop, valid_set)
            if fired:
                trigger = Trigger(fired[0].name, fired[0].rule,
                                  {**fired[0].evidence, "all_triggers": [f.name for f in fired]})
                t0 = time.perf_counter()
                res = self.sage.think(self._sage_context())
                timings["sage"] = time.perf_counter() - t0
                llm_calls += res.llm_calls
                notes += res.problems
                st.steps_since_sage = 0
                if res.plan:
                    st.plan = plan = res.plan
                if res.error:
                    notes.append(f"Sage failed ({res.error}); falling back to Swift's action")
                elif res.actions:
                    st.buffer = deque(res.actions)
                    st.mode, st.buffer_failures = "sage", 0
                    buffer_before = list(st.buffer)
                    action = self._next_buffered(valid, mappings, notes)
                    if action is not None:
                        system = "sage"
                    else:
                        st.mode = "swift"
                        notes.append("no buffered action mapped onto a valid one; falling back to Swift's action")
            if action is None:
                action = prop.action
                system = "swift"

        t0 = time.perf_counter()
        obs = self.env.step(action)
        timings["env"] = time.perf_counter() - t0
        # bookkeeping for the next step
        if system == "sage":
            failed = (not obs.action_valid) or obs.reward < 0
            st.buffer_failures = st.buffer_failures + 1 if failed else 0
            if st.buffer_failures >= self.cfg.controller.buffer_fail_limit:
                notes.append(f"{st.buffer_failures} buffered actions failed in a row: back to Swift next step")
                st.buffer.clear()
        st.rewards.append(obs.reward)
        st.steps_since_sage += 1
        ss = st.swift_state
        ss.history.append(HistoryStep(action=action, observation=obs.text, reward=obs.reward, room=obs.room))
        ss.score, ss.look, ss.inventory = obs.score, obs.look, obs.inventory
        st.sage_history.append((action, obs.text))
        self.last = obs
        timings["total"] = time.perf_counter() - t_all
        rec = StepRecord(
            step=obs.step, action=action, system=system, observation=obs.text, look=obs.look,
            inventory=obs.inventory, score=obs.score, reward=obs.reward, moves=obs.moves, done=obs.done,
            failed=obs.failed, room=obs.room, action_valid=obs.action_valid, trigger=trigger,
            swift_candidates=[SwiftCandidate(a, round(s, 4), a in valid_set) for a, s in prop.candidates] if prop else [],
            swift_top1=prop.top1 if prop else None,
            swift_valid_ranked=[SwiftCandidate(a, round(s, 4), True) for a, s in prop.valid_ranked] if prop else [],
            plan=plan, buffer_before=buffer_before,
            buffer_after=list(st.buffer), mappings=mappings, llm_calls=llm_calls,
            env_events=self.env.drain_events(), timings={k: round(v, 4) for k, v in timings.items()}, notes=notes)
        self.writer.append(rec)
        self.records.append(rec)
        if obs.done:
            self.finish()
        return rec
