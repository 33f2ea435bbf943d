"""The SwiftSage loop (docs/AGENT.md §4): Swift acts until a trigger hands control to Sage, whose
action buffer runs FIFO until it is empty or its actions fail several times in a row.

Every environment step produces exactly one `StepRecord`, written to the trace before the next step
starts. The app drives an `Agent` one `step()` at a time and never reaches into it otherwise.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Callable

from .actions import action_key
from .amm import EpisodicMemory, StepFacts
from .amm.stats import EpisodeMemoryStats
from .config import CHOICES, Config
from .control.buffer import BufferTurn
from .control.continuing import Continuing
from .control.draft import LazyEmbedder, StepDraft, timed
from .control.policies import (ModelSwift, ScriptedSwift, SwiftPolicy, defer_focus, invalid_fires,  # noqa: F401
                               load_swift, unnamed_in_state)
from .control.parts import Parts
from .control.sage_turn import SageTurn
from .control.srm_hooks import SRMHooks
from .control.swift_turn import SwiftTurn
from .control.switching import Switching
from .decisions import BufferFailLimit
from .env import Observation, ScienceWorld
from .episode import AgentState, Buffered, ReplayError, apply, digest, initial_state  # noqa: F401 - re-exported
from .episode.reducer import SAGE_CALL_PURPOSES, sage_called, sage_streak_after  # noqa: F401 - re-exported
from .episode.replay import same_settings  # noqa: F401 - re-exported
from .episode.state import differences
from .gold import focus_limit, focus_unrewarded_limit, worked_examples
from .llm import LLMBackend
from .llm.base import cache_files
from .provenance import code_revision, config_hash, machine, seed_everything
from .sage import Sage
from .srm.gate1 import DROP
from .srm.stagnation import detect
from .trace import EnvEvent, EpisodeHeader, EpisodeSummary, StepRecord, SwiftCandidate, Trigger, TraceWriter

ROOT = Path(__file__).resolve().parents[1]


def _project_relative(path: Path | str | None) -> str:
    """A path for the record: relative to the project when inside it (a shipped example names no checkout)."""
    if not path:
        return ""
    if "://" in str(path):  # a store on a Chroma server: its URL
        return str(path)
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(Path(path).resolve())


RUNS_DIR = ROOT / "runs"


def mechanisms(cfg: Config) -> list[str]:
    """What actually runs under a config: the episode header lists it and the app shows only these panels."""
    return Parts.wire(cfg, None).names()  # type: ignore[arg-type] - the names need no model


# the state fields that a step's decisions change while it runs (the rest follows from the observation): the live
# step checks that `apply` rebuilds them from the record exactly as the decisions left them
DECIDED = ("mode", "buffer", "buffer_sources", "buffer_failures", "critic_calls", "last_critic_step",
           "critic_backoff_until", "menu_tried")
log = logging.getLogger(__name__)
STRICT_ENV = "SWIFTSAGE_STRICT_STATE"  # set (tests): a live step whose record does not rebuild its state raises


class Agent(Switching, BufferTurn, SageTurn, SwiftTurn, SRMHooks, Continuing):
    """One episode at a time: `start()`, then `step()` until `done`, then `finish()`. The parts of a step live in
    `agent_core.control` by concern (switching, buffer, Sage's and Swift's turns, SRM's hooks, replay); this class
    holds the lifecycle and the step loop."""

    def __init__(self, cfg: Config, swift: SwiftPolicy, llm: LLMBackend, env: ScienceWorld | None = None,
                 runs_dir: str | Path = RUNS_DIR, embedder=None, reflect_in_background: bool = False,
                 keep_llm_cache: bool = True):
        self.cfg = cfg
        # the LLM's prompt cache kept beside the trace after each step, so a resume answers as the uninterrupted run
        # (an evaluation plays interrupted episodes again from the start and needs none)
        self.keep_llm_cache = keep_llm_cache
        self.swift = swift
        # a shared embedded model: this agent's own prompt cache, whoever else calls it; the reflection between
        # episodes (in the background in the app) has one of its own, so it never touches the next episode's
        self._reflect_llm = llm.for_agent()
        llm = llm.for_agent()
        self.llm = llm
        for name, allowed in CHOICES.items():  # a Config built in code skipped the check on load
            part, _, key = name.partition(".")
            value = getattr(getattr(cfg, part), key)
            if value not in allowed:
                raise ValueError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
        self.sage = Sage(llm, cfg.sage, embedder=LazyEmbedder(lambda: self.embedder))
        self.parts = Parts.wire(cfg, llm)  # the mechanisms this config runs, wired once
        self.env = env or ScienceWorld(cfg.env)
        self.runs_dir = Path(runs_dir)
        self._embedder = embedder
        self.writer: TraceWriter | None = None
        self.state = AgentState()
        self.last: Observation | None = None
        self.records: list[StepRecord] = []
        self.summary: EpisodeSummary | None = None
        self._focus_limit: int | None = None
        self._focus_unrewarded_gold = 0
        self._resumed: list[dict] = []  # this episode's resumes (agent_core.run --resume), for its summary
        # AMM: the episodic memory (None when off); reflection between episodes, in the background in the app
        self.amm = EpisodicMemory(cfg, self.runs_dir) if cfg.amm.enabled else None
        self.reflect_in_background = reflect_in_background
        if self.amm is not None and cfg.amm.importance_mode == "llm":
            self.amm.llm_rate = lambda p: self.llm.chat(p, max_tokens=8, temperature=0.0).text
        if hasattr(llm, "seed"):  # Config.seed reaches the model's sampler too
            llm.seed = cfg.seed
        self.code = code_revision()

    # ------------------------------------------------------------ lifecycle
    @property
    def embedder(self):
        if self._embedder is None:
            from memory_store.embeddings import get_embedder

            self._embedder = get_embedder(threads=self.cfg.memory.embedding_threads)
        return self._embedder

    @property
    def config_hash(self) -> str:
        """Of the settings as they are now (a runner may set the store's folder after building the agent)."""
        return config_hash(self.cfg.to_record())

    @property
    def done(self) -> bool:
        return self.last is not None and self.last.done

    @property
    def trace_path(self) -> Path | None:
        return self.writer.path if self.writer else None

    def start(self, task: str | int, variation: int, split: str | None = "test", run_id: str | None = None,
              parent: dict | None = None, look: str | None = None) -> EpisodeHeader:
        """A new episode and its trace (`runs_dir/<run_id>.jsonl`; by default a timestamped id). `look`: the
        starting look of the episode this one replays (a fork), so that the world lists its objects in that order."""
        self.finish("stopped")
        if self.env.cfg.step_limit != self.cfg.env.step_limit:  # a shared env plays by this agent's step limit
            self.env.cfg = dataclasses.replace(self.env.cfg, step_limit=self.cfg.env.step_limit)
        obs = self.env.reset(task, variation, split=split, look=look)
        self.llm.new_episode()
        info = self.env.task
        self._init_episode(obs)
        seed_everything(self.cfg.seed)
        run_id = run_id or f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{info.name}-v{variation}-{self.cfg.preset}-" \
                          f"{uuid.uuid4().hex[:6]}"
        header = EpisodeHeader(task=info.name, task_index=info.index, variation=variation, split=self.env.split or "",
                               task_description=obs.task_description, config=self.cfg.to_record(),
                               models={"swift": self.swift.name, "sage": f"{self.llm.name}:{self.llm.model}"},
                               seed=self.cfg.seed, run_id=run_id, initial_observation=obs.text,
                               initial_look=obs.look, initial_inventory=obs.inventory,
                               mechanisms=self.parts.names(), parent=dict(parent or {}), code=dict(self.code),
                               config_hash=self.config_hash, machine=dict(machine()))
        if self.amm is not None:
            header.memory_at_start = self.amm.start_episode(run_id, info.name, obs.task_description, variation)
            header.memory_store = _project_relative(self.amm.path)
        self.writer = TraceWriter(self.runs_dir / f"{run_id}.jsonl", header)
        for f in cache_files(self.writer.path):  # an earlier episode's under the same name is not this one's
            f.unlink(missing_ok=True)
        return header

    def _init_episode(self, obs: Observation) -> None:
        """The agent's state at the start of an episode (after the environment's reset)."""
        info = self.env.task
        self.last = obs
        self.records, self.summary, self._resumed = [], None, []
        self.state = initial_state(info.name, obs.task_description, obs.score, obs.look, obs.inventory, obs.room)
        self._examples = worked_examples(info.name, self.env.variation, self.cfg.sage.worked_examples)
        self._focus_limit = focus_limit(info.name)
        self._focus_unrewarded_gold = focus_unrewarded_limit(info.name)

    @property
    def resumed(self) -> list[dict]:
        """This episode's resumes so far (after which step, replay time, whether exact, what changed)."""
        return list(self._resumed)

    def finish(self, reason: str | None = None, error: str | None = None) -> EpisodeSummary | None:
        if self.writer is None or self.writer.closed:
            return self.summary
        last = self.last
        if reason is None:
            reason = ("success" if last.score >= 100 else "failure" if last.failed else
                      "step_limit" if last.done else "stopped")
        self.summary = EpisodeSummary(final_score=last.score if last else 0.0, success=bool(last and last.score >= 100),
                                      failed=bool(last and last.failed), steps=len(self.records), reason=reason,
                                      error=error, resumed=list(self._resumed))
        if self.amm is not None:
            gen = lambda p: self._reflect_llm.chat(p, max_tokens=self.cfg.amm.reflection_max_tokens,  # noqa: E731
                                                   temperature=0.0).text
            stats = EpisodeMemoryStats.from_records(self.records, self.writer.header.memory_at_start)
            self.summary.memory = {**stats.to_dict(), "store": _project_relative(self.amm.path),
                                   "reflection": self.amm.end_episode(len(self.records), gen,
                                                                      self.reflect_in_background,
                                                                      ended=reason not in ("stopped", "error"))}
        self.writer.close(self.summary)
        if reason not in ("stopped", "error"):  # an episode that ended is never resumed: its cache goes
            for f in cache_files(self.writer.path):
                f.unlink(missing_ok=True)
        return self.summary

    def _keep_llm_cache(self, step: int) -> None:
        if not self.keep_llm_cache or self.writer is None:
            return
        try:
            self.llm.save_cache_file(self.writer.path, step)
        except Exception as e:  # noqa: BLE001 - a full disk or a llama.cpp failure loses the exact resume, never the
            # step (its record is written; the stamp still names an earlier step, so a resume says it is not exact)
            log.warning("could not keep the LLM's cache after step %d: %s", step, e)

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

    # ------------------------------------------------------------ one step
    def step(self, given: str | None = None) -> StepRecord:
        """One step. `given`: the action this step plays instead of deciding one (a branch of a rollout,
        agent_core.rollout: system "branch"); it passes the same last safeguard as any action."""
        if self.writer is None or self.last is None:
            raise RuntimeError("start(task, variation) first")
        if self.done:
            raise RuntimeError("the episode is over")
        prev = self.state
        try:
            return self._step(prev, given)
        except BaseException:
            self.state = prev  # a step that never reached its record changed nothing the agent knows
            if self.amm is not None:
                self.amm.discard_step()  # nor the store's access times (its writes go at a resume's rewind)
            raise

    def _step(self, prev: AgentState, given: str | None = None) -> StepRecord:
        t_all = time.perf_counter()
        # the step decides on a working copy; the committed state changes only through `apply` below
        self.state = st = prev.draft()
        cc, srm = self.cfg.controller, self.cfg.srm
        w = StepDraft(step=len(self.records) + 1, buffer_before=[b.text for b in st.buffer])
        t0 = time.perf_counter()
        valid = self.env.valid_actions()
        w.timings["valid_actions"] = time.perf_counter() - t0
        plan_before = dict(st.plan)
        action: str | None = None
        system = "swift"

        if given is not None:
            action, system = given, "branch"
        elif self.last.menu:
            action, system = self._answer_menu(w)
        else:
            if self.parts.critic is not None:
                self._critic_before_step(w, valid)
            if st.mode == "sage" and st.buffer:
                action, system = self._take_buffered(w, valid)
                if (action is None and self.parts.gate is not None and w.drops >= srm.gate1_drops_for_sage
                        and not w.sage_called and self.parts.sage):
                    trig = Trigger("gate1_drops", f"Gate-1 dropped {w.drops} buffered actions in this step (at "
                                                  f"{srm.gate1_drops_for_sage} drops Sage decides the step, once)",
                                   {"dropped": [d.proposed for d in w.gate1 if d.decision == DROP]})
                    if not self._swift_forced(w, [trig]):
                        action, system = self._call_sage(w, trig, valid)
            if action is None:
                if st.mode == "sage":
                    failed = st.buffer_failures >= cc.buffer_fail_limit
                    w.trigger = w.trigger or Trigger(
                        "buffer_failed" if failed else "buffer_empty",
                        f"back to Swift: {cc.buffer_fail_limit} buffered actions failed in a row" if failed else
                        "back to Swift: the action buffer is empty", {"buffer_failures": st.buffer_failures})
                    st.mode, st.buffer_failures = "swift", 0
                    st.buffer.clear()
                action, system = self._swift_turn(w, valid)

        action = self._only_valid(action, valid, w)
        t0 = time.perf_counter()
        room_before, inv_before, score_before = self.last.room, st.swift_state.inventory, st.swift_state.score
        obs = self.env.step(action)
        w.timings["env"] = time.perf_counter() - t0
        self.last = obs
        if self.amm is not None:  # the salience gate: at most one record for this step
            with timed(w, "amm"):
                w.writes += self.amm.write_step(w.step, StepFacts(
                    task=self.env.task.name, task_description=st.swift_state.task_description,
                    variation=self.env.variation, room=room_before, inventory=inv_before,
                    action=w.menu.request if w.menu else action, observation=obs.text, reward=obs.reward,
                    score_before=score_before, score_after=obs.score, done=obs.done, history=list(st.sage_history)),
                    st.amm_written)
        # bookkeeping for the next step
        if system in ("sage", "critic") and not w.menu:
            failed = (not obs.action_valid) or obs.reward < 0
            st.buffer_failures = st.buffer_failures + 1 if failed else 0
            if st.buffer_failures >= cc.buffer_fail_limit:
                w.emit(BufferFailLimit(failures=st.buffer_failures, when="next_step"))
                st.buffer.clear()
        prop = w.prop
        valid_keys = {action_key(v) for v in valid}
        rec = StepRecord(
            step=obs.step, action=action, system=system, observation=obs.text, look=obs.look,
            inventory=obs.inventory, score=obs.score, reward=obs.reward, moves=obs.moves, done=obs.done,
            failed=obs.failed, room=obs.room, action_valid=obs.action_valid, trigger=w.trigger,
            swift_candidates=[SwiftCandidate(a, round(s, 4), action_key(a) in valid_keys) for a, s in prop.candidates]
            if prop else [],
            swift_top1=prop.top1 if prop else None,
            swift_valid_ranked=[SwiftCandidate(a, round(s, 4), True) for a, s in prop.valid_ranked] if prop else [],
            swift_focus_unnamed=list(prop.focus_unnamed) if prop else [],
            sage_focus_unnamed=list(w.sage_unnamed or []), sage_focus_refused=list(w.refused),
            plan=dict(st.plan) if st.plan else plan_before, buffer_before=w.buffer_before,
            buffer_after=[b.text for b in st.buffer], buffer_after_sources=[b.source for b in st.buffer],
            mappings=w.mappings, gate1=w.gate1, menu=w.menu, critic=w.critic, llm_calls=w.llm_calls,
            env_events=self.env.drain_events(), notes=[d.describe() for d in w.decisions], decisions=w.decisions,
            mode_after="sage" if st.mode == "sage" and st.buffer else "swift",
            memories_written=w.writes, retrievals=w.retrievals, menu_options=list(obs.menu or []),
            after=digest(st))
        seen = apply(prev, rec, self.cfg)  # what the agent knows once it has seen the observation
        if self.amm is not None and not obs.done:  # T2 / T3: retrieve and cache, logged in this step
            with timed(w, "amm"):
                recent = (self.records + [rec])[-self.cfg.amm.recent_window:]
                invalid = [r.action for r in recent if r.action_valid is False]
                rec.retrievals += self.amm.after_step(rec.step, obs.room, obs.inventory, seen.sage_history,
                                                      seen.rewards, invalid, seen.amm_t3_fired)
        if self.parts.stagnation and not obs.done:
            t0 = time.perf_counter()
            rec.stagnation = detect(self.records + [rec], srm, prev.last_report_step)
            w.timings["stagnation"] = time.perf_counter() - t0
        new = apply(prev, rec, self.cfg)
        wrong = differences(digest(st), digest(new), DECIDED) + (["plan"] if new.plan != st.plan else [])
        if wrong:  # the decisions and the transition disagree: a defect; the transition's state stands
            if os.environ.get(STRICT_ENV):
                raise AssertionError(f"step {rec.step}: apply() does not rebuild the decided state: {wrong}")
            rec.env_events.append(EnvEvent(kind="state_check", detail=f"apply() differs from the step: {wrong}"))
        rec.after = digest(new)
        w.timings["total"] = time.perf_counter() - t_all
        rec.timings = {k: round(v, 4) for k, v in w.timings.items()}
        self.writer.append(rec)
        self.state = new
        self.records.append(rec)
        self._keep_llm_cache(rec.step)
        if self.amm is not None:
            self.amm.commit_step()
        if obs.done:
            self.finish()
        return rec


__all__ = ["Agent", "AgentState", "Buffered", "ModelSwift", "ReplayError", "RUNS_DIR", "ROOT", "SAGE_CALL_PURPOSES",
           "ScriptedSwift", "SwiftPolicy", "defer_focus", "invalid_fires", "load_swift", "mechanisms", "sage_called",
           "sage_streak_after", "same_settings", "unnamed_in_state"]
