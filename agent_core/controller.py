"""The SwiftSage loop (SPEC.md section 4): Swift acts until a trigger hands control to Sage, whose
action buffer runs FIFO until it is empty or its actions fail several times in a row.

Every environment step produces exactly one `StepRecord`, written to the trace before the next step
starts. The app drives an `Agent` one `step()` at a time and never reaches into it otherwise.
"""
from __future__ import annotations

import dataclasses
import time
import uuid
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Protocol, Sequence

from .actions import action_key, argument_of, canonical, is_focus, never_a_focus_target, strip_decorations
from .amm import EpisodicMemory, StepFacts
from .config import Config
from .env import Observation, ScienceWorld
from .gold import focus_limit, worked_examples
from .task_focus import unnamed_focus_actions
from .llm import LLMBackend
from .sage import Sage, SageContext, map_action
from .srm.critic import Critic, CriticContext, limit_moves
from .srm.gate1 import DROP, Gate1, GateContext, menu_choice
from .srm.loop_guard import STREAK, apply_loop_guard
from .srm.stagnation import detect
from .swift.format import SwiftState, swift_input
from .swift.model import SwiftProposal
from .trace import (CriticCall, EnvEvent, EpisodeHeader, EpisodeSummary, Gate1Decision, MemoryRetrieval, MemoryWrite,
                    MenuChoice, StagnationReport, StepRecord, SwiftCandidate, TraceWriter, Trigger)

ROOT = Path(__file__).resolve().parents[1]
RUNS_DIR = ROOT / "runs"


def mechanisms(cfg: Config) -> list[str]:
    """What actually runs under a config: the episode header lists it and the app shows only these panels."""
    out = ["swift"] + (["task_focus"] if cfg.swift.task_focus_check else []) + \
        (["sage"] if cfg.controller.sage_enabled else []) + \
        (["sage_task_focus"] if cfg.controller.sage_enabled and cfg.sage.task_focus_check else [])
    if cfg.amm.enabled:
        out += ["amm"] + (["amm_swift_injection"] if cfg.amm.swift_injection else [])
    if cfg.srm.enabled:
        out += ["gate1", "stagnation"] + (["critic"] if cfg.srm.critic_enabled else []) + \
               (["loop_guard"] if cfg.srm.loop_guard else [])
    return out


SAGE_CALL_PURPOSES = ("plan", "focus_review")  # one of these LLM calls in a step = Sage was called there


def sage_called(rec: StepRecord) -> bool:
    return any(c.purpose in SAGE_CALL_PURPOSES for c in rec.llm_calls)


def sage_streak_after(streak: int, rec: StepRecord) -> int:
    """Sage calls in a row after this step: one more where Sage was called, back to 0 where Swift acted alone.
    The live step and the replay of a recorded one (fork, resume) both count with this."""
    if sage_called(rec):
        return streak + 1
    return 0 if rec.system == "swift" else streak


class ReplayError(RuntimeError):
    """A recorded episode cannot be continued (fork, resume): the step is out of range, the episode is over, or
    the replay diverged from the record."""



class SwiftPolicy(Protocol):
    name: str

    def propose(self, state: SwiftState, valid_actions: Sequence[str], memory: str = "") -> SwiftProposal: ...


def unnamed_in_state(state: SwiftState, valid_actions: Sequence[str]) -> list[str]:
    """The valid focus actions that are not options in this state (agent_core.task_focus), judged against the
    room and inventory in view and the episode's focuses so far. Swift and Sage use the same judgement."""
    context = state.look + "\n" + state.inventory
    done = [(argument_of(canonical(h.action)), context) for h in state.history if is_focus(h.action)]
    return unnamed_focus_actions(state.task, state.task_description, list(valid_actions), context, done)


class ModelSwift:
    """The trained Swift model behind the controller's interface. The loop guard (an SRM mechanism) is
    applied by the controller when SRM is on; `loop_guard=True` here is for the Swift-only benchmark."""

    def __init__(self, model, k: int = 10, n: int = 5, loop_guard: bool = False, loop_guard_streak: int = STREAK,
                 focus_margin: float = 0.0, defer_unsure_focus: bool = False, task_focus_check: bool = True):
        self.model, self.k, self.n, self.loop_guard = model, k, n, loop_guard
        self.task_focus_check = task_focus_check
        self.loop_guard_streak = loop_guard_streak
        self.name = model.name
        # Swift alone (no Sage to review a key decision): a focus below the margin is set aside
        self.focus_margin, self.defer_unsure_focus = focus_margin, defer_unsure_focus

    def propose(self, state: SwiftState, valid_actions: Sequence[str], memory: str = "") -> SwiftProposal:
        # AMM's T1 retry: the trained input stays intact and a short memory field follows it (the input is cut
        # in the middle of the history when too long, so the field at the end survives)
        text = swift_input(state, self.k) + memory
        unnamed = unnamed_in_state(state, valid_actions) if self.task_focus_check else []
        if unnamed:
            drop = {action_key(v) for v in unnamed}
            valid_actions = [v for v in valid_actions if action_key(v) not in drop]
        prop = self.model.propose(text, valid_actions, self.n)
        if unnamed and is_focus(prop.top1):
            prop.focus_unnamed = list(unnamed)
        if self.defer_unsure_focus and prop.focus_margin is not None and prop.focus_margin < self.focus_margin:
            prop = defer_focus(prop, self.model, text, valid_actions, self.n, self.focus_margin)
        return apply_loop_guard(prop, state.history, self.loop_guard_streak) if self.loop_guard else prop

    def rank(self, state: SwiftState, valid_actions: Sequence[str], n: int) -> list[str]:
        """Swift's n best valid actions (a wider beam than a step uses): the head of Sage's numbered list."""
        return [a for a, _s in self.model.rank_valid(swift_input(state, self.k), valid_actions, n)]


def invalid_fires(prop: SwiftProposal, valid_keys: set[str], cc) -> bool:
    """The invalid trigger. `top1` (SwiftSage): Swift's unconstrained top-1 is not a valid action, even when its
    best valid action is right (`focus on painting` vs the valid `focus on finger painting`). `ranked`: Swift
    has no valid action it rates at least `invalid_min_score` (mean log-probability per token)."""
    if cc.invalid_rule == "top1":
        return action_key(prop.top1) not in valid_keys  # case and spacing aside: Swift's tokenizer is uncased
    return not prop.valid_ranked or prop.valid_ranked[0][1] < cc.invalid_min_score


def defer_focus(prop: SwiftProposal, model, text: str, valid_actions: Sequence[str], n: int,
                margin: float) -> SwiftProposal:
    """Swift is unsure which object to focus on and nobody can review it: take its best non-focus action
    instead (a wrong focus ends the task at -100; waiting costs a step)."""
    others = [a for a, _s in prop.valid_ranked if not is_focus(a)]
    if not others:  # every ranked candidate was a focus: rank the non-focus actions on their own
        rest = [v for v in valid_actions if not is_focus(v)]
        others = [a for a, _s in model.rank_valid(text, rest, n)] if rest else []
    if not others:
        return prop
    return dataclasses.replace(prop, action=others[0], deferred=(
        f"focus margin {prop.focus_margin:.2f} < {margin:.2f}: '{prop.action}' set aside for '{others[0]}'"))


class ScriptedSwift:
    """Replays fixed proposals (deterministic tests and demos of the switching rules)."""

    name = "scripted-swift"

    def __init__(self, actions: Sequence[str] | Callable[[SwiftState, Sequence[str]], str],
                 on_memory: Callable[[SwiftState, Sequence[str], str], str] | None = None):
        self._fn = actions if callable(actions) else None
        self._items = list(actions) if not callable(actions) else []
        self._on_memory = on_memory  # what to propose on a T1 retry (default: the same as without memory)
        self.memories: list[str] = []  # memory fields received (tests read them)

    def propose(self, state: SwiftState, valid_actions: Sequence[str], memory: str = "") -> SwiftProposal:
        if memory:
            self.memories.append(memory)
        if memory and self._on_memory:
            a = self._on_memory(state, valid_actions, memory)
        elif self._fn:
            a = self._fn(state, valid_actions)
        else:
            a = self._items.pop(0) if self._items else "look around"
        by_key = {action_key(v): v for v in valid_actions}
        hit = by_key.get(action_key(a))
        return SwiftProposal(top1=a, candidates=[(a, 0.0)], valid_ranked=[(hit, 0.0)] if hit else [],
                             action=hit or a)


def load_swift(cfg: Config) -> SwiftPolicy:
    from .swift.model import SwiftModel, default_threads

    sc = cfg.swift
    model = SwiftModel(ROOT / sc.checkpoint_dir / "model", threads=default_threads(),
                       max_input_tokens=sc.max_input_tokens, max_output_tokens=sc.max_output_tokens,
                       quantize=sc.quantize, unconstrained_beams=sc.unconstrained_beams)
    return ModelSwift(model, sc.history_k, sc.num_candidates, focus_margin=sc.focus_margin,
                      defer_unsure_focus=sc.defer_unsure_focus and not cfg.controller.sage_enabled,
                      task_focus_check=sc.task_focus_check)


@dataclass
class Buffered:
    """One action in the FIFO buffer, with who put it there."""

    text: str
    source: str  # sage | critic
    gated_step: int = 0  # the step at which Gate-1 admitted it (not re-checked in that same step)


@dataclass
class AgentState:
    mode: str = "swift"  # swift | sage (Sage mode = the buffer is being executed, whoever filled it)
    buffer: deque = field(default_factory=deque)  # of Buffered
    buffer_failures: int = 0
    rewards: list[float] = field(default_factory=list)
    steps_since_sage: int = 0
    sage_streak: int = 0  # Sage calls since Swift last acted alone (controller.sage_streak_limit)
    plan: dict[str, str] = field(default_factory=dict)
    swift_state: SwiftState | None = None
    sage_history: list[tuple[str, str]] = field(default_factory=list)
    # SRM
    focus_done: int = 0
    last_report_step: int | None = None
    pending_report: StagnationReport | None = None
    pending_report_step: int = 0
    avoid: list[str] = field(default_factory=list)
    avoid_until: int = 0
    critic_calls: int = 0
    last_critic_step: int | None = None
    critic_backoff_until: int = 0
    menu_tried: dict[str, list[int]] = field(default_factory=dict)  # a menu's options -> the numbers sent


@dataclass
class _Step:
    """What one step collects before it becomes a StepRecord."""

    step: int
    gate1: list[Gate1Decision] = field(default_factory=list)
    mappings: list = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    llm_calls: list = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    trigger: Trigger | None = None
    prop: SwiftProposal | None = None
    menu: MenuChoice | None = None
    critic: CriticCall | None = None
    buffer_before: list[str] = field(default_factory=list)
    drops: int = 0
    sage_called: bool = False
    retrievals: list[MemoryRetrieval] = field(default_factory=list)
    writes: list[MemoryWrite] = field(default_factory=list)
    sage_unnamed: list[str] | None = None  # focus targets the task does not name, once Sage needed them
    refused: list[str] = field(default_factory=list)  # buffered commands that landed on one of them


@contextmanager
def _timed(w: _Step, part: str):
    """Add the time spent inside to the step's timing of `part` (a part can run several times in a step)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        w.timings[part] = w.timings.get(part, 0.0) + time.perf_counter() - t0


class _LazyEmbedder:
    """Loads the sentence embedder only when Gate-1 or the mapping actually needs a similarity."""

    def __init__(self, get):
        self._get = get

    def encode(self, texts):
        return self._get().encode(texts)


class Agent:
    """One episode at a time: `start()`, then `step()` until `done`, then `finish()`."""

    def __init__(self, cfg: Config, swift: SwiftPolicy, llm: LLMBackend, env: ScienceWorld | None = None,
                 runs_dir: str | Path = RUNS_DIR, embedder=None, reflect_in_background: bool = False):
        self.cfg = cfg
        self.swift = swift
        self.llm = llm
        for field_, value, allowed in (("controller.invalid_rule", cfg.controller.invalid_rule, ("top1", "ranked")),
                                       ("controller.critical_review", cfg.controller.critical_review, ("unsure", "always")),
                                       ("controller.focus_review", cfg.controller.focus_review, ("choose", "replan"))):
            if value not in allowed:
                raise ValueError(f"{field_}={value!r}: use one of {', '.join(allowed)}")
        self.sage = Sage(llm, cfg.sage, embedder=_LazyEmbedder(lambda: self.embedder))
        self.gate = Gate1(cfg.srm)
        self.critic = Critic(llm, cfg.srm, temperature=cfg.sage.temperature)
        self.env = env or ScienceWorld(cfg.env)
        self.runs_dir = Path(runs_dir)
        self._embedder = embedder
        self.writer: TraceWriter | None = None
        self.state = AgentState()
        self.last: Observation | None = None
        self.records: list[StepRecord] = []
        self.summary: EpisodeSummary | None = None
        self._focus_limit: int | None = None
        self._resumed: list[dict] = []  # this episode's resumes (agent_core.run --resume), for its summary
        # AMM: the episodic memory (None when off); reflection between episodes, in the background in the app
        self.amm = EpisodicMemory(cfg, self.runs_dir) if cfg.amm.enabled else None
        self.reflect_in_background = reflect_in_background
        if self.amm is not None and cfg.amm.importance_mode == "llm":
            self.amm.llm_rate = lambda p: self.llm.chat(p, max_tokens=8, temperature=0.0).text

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

    def start(self, task: str | int, variation: int, split: str | None = "test", run_id: str | None = None,
              parent: dict | None = None) -> EpisodeHeader:
        """A new episode and its trace (`runs_dir/<run_id>.jsonl`; by default a timestamped id)."""
        self.finish("stopped")
        if self.env.cfg.step_limit != self.cfg.env.step_limit:  # a shared env plays by this agent's step limit
            self.env.cfg = dataclasses.replace(self.env.cfg, step_limit=self.cfg.env.step_limit)
        obs = self.env.reset(task, variation, split=split)
        info = self.env.task
        self._init_episode(obs)
        run_id = run_id or f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{info.name}-v{variation}-{self.cfg.preset}-" \
                          f"{uuid.uuid4().hex[:6]}"
        header = EpisodeHeader(task=info.name, task_index=info.index, variation=variation, split=self.env.split or "",
                               task_description=obs.task_description, config=self.cfg.to_record(),
                               models={"swift": self.swift.name, "sage": f"{self.llm.name}:{self.llm.model}"},
                               seed=self.cfg.seed, run_id=run_id, initial_observation=obs.text,
                               initial_look=obs.look, initial_inventory=obs.inventory,
                               mechanisms=mechanisms(self.cfg), parent=dict(parent or {}))
        if self.amm is not None:
            header.memory_at_start = self.amm.start_episode(run_id, info.name, obs.task_description, variation)
            header.memory_store = str(self.amm.path or "")
        self.writer = TraceWriter(self.runs_dir / f"{run_id}.jsonl", header)
        return header

    def _init_episode(self, obs: Observation) -> None:
        """The agent's state at the start of an episode (after the environment's reset)."""
        info = self.env.task
        self.last = obs
        self.records, self.summary, self._resumed = [], None, []
        self.state = AgentState(swift_state=SwiftState(task_description=obs.task_description, score=obs.score,
                                                       look=obs.look, inventory=obs.inventory, start_room=obs.room,
                                                       task=info.name))
        self._examples = worked_examples(info.name, self.env.variation, self.cfg.sage.worked_examples)
        self._focus_limit = focus_limit(info.name)

    def _replay(self, steps: Sequence[StepRecord], on_replayed: Callable[[StepRecord], None]) -> float:
        """Replay recorded steps in the environment, checking every observation and score against the record,
        and rebuild what the agent knows after them (Swift's history, rewards, focus count, plan, Critic use).
        Raises ReplayError at the first divergence. Returns the seconds it took."""
        t0 = time.perf_counter()
        st = self.state
        for rec in steps:
            obs = self.env.step(rec.action)
            if obs.text.strip() != rec.observation.strip() or obs.score != rec.score:
                self.last = obs
                raise ReplayError(f"replay diverged at step {rec.step} ('{rec.action}'): recorded {rec.score:g} "
                                  f"points and {rec.observation[:160]!r}, replayed {obs.score:g} points and "
                                  f"{obs.text[:160]!r}")
            menu = rec.menu
            if (is_focus(rec.action) and not obs.menu) or (menu and menu.chosen >= 0 and is_focus(menu.request)):
                st.focus_done += 1
            st.rewards.append(obs.reward)
            st.steps_since_sage = 0 if sage_called(rec) else st.steps_since_sage + 1
            st.sage_streak = sage_streak_after(st.sage_streak, rec)
            st.swift_state.observe(rec.action, obs.text, obs.reward, obs.room, obs.score, obs.look, obs.inventory)
            st.sage_history.append((rec.action, obs.text))
            if rec.plan:
                st.plan = dict(rec.plan)
            if rec.critic is not None and rec.critic.status in ("called", "failed"):
                st.critic_calls, st.last_critic_step = st.critic_calls + 1, rec.step
            if rec.stagnation is not None:
                st.last_report_step = rec.step
            self.last = obs
            on_replayed(rec)
        return time.perf_counter() - t0

    def resume(self, ep) -> EpisodeHeader:
        """Continue an interrupted episode (agent_core.trace.Episode: no summary, or one that says stopped or
        error) in its own trace: the finished steps stay byte for byte (a half-written last line is dropped), a
        fresh JVM replays them and checks every observation against the record, the action buffer is restored
        from the last step, and the agent goes on from there. The summary records every resume."""
        h, steps = ep.header, ep.steps
        if ep.summary is not None and ep.summary.reason not in ("stopped", "error"):
            raise ReplayError(f"{ep.path} already ended ({ep.summary.reason}, {ep.summary.final_score:g} points): "
                              f"nothing to resume")
        if steps and steps[-1].done:
            raise ReplayError(f"{ep.path} ended at step {steps[-1].step} ({steps[-1].score:g} points): nothing to "
                              f"resume")
        self.finish("stopped")
        if self.env.cfg.step_limit != self.cfg.env.step_limit:
            self.env.cfg = dataclasses.replace(self.env.cfg, step_limit=self.cfg.env.step_limit)
        obs = self.env.reset(h.task, h.variation, split=h.split or None)
        if obs.look.strip() != (h.initial_look or obs.look).strip():
            raise ReplayError(f"replay diverged at step 0: the task starts in another state than recorded "
                              f"({obs.look[:120]!r} vs {h.initial_look[:120]!r})")
        self._init_episode(obs)
        if self.amm is not None:
            self.amm.start_episode(h.run_id, h.task, obs.task_description, h.variation)
        dropped = ep.truncated_tail is not None
        replay_s = self._replay(steps, self.records.append)
        self.writer = TraceWriter.reopen(ep.path, len(steps))  # after the replay: a divergence changes no file
        last = steps[-1] if steps else None
        if last is not None and last.mode_after == "sage" and last.buffer_after:
            srcs = last.buffer_after_sources or ["sage"] * len(last.buffer_after)
            self.state.buffer = deque(Buffered(a, s) for a, s in zip(last.buffer_after, srcs))
            self.state.mode = "sage"
        prior = list(ep.summary.resumed) if ep.summary is not None else []
        info = {"at_step": len(steps), "at": time.time(), "replay_s": round(replay_s, 3),
                "dropped_half_written_line": dropped,
                "previous_end": ep.summary.reason if ep.summary is not None else "killed (no summary)"}
        self._resumed = prior + [info]
        self.env.events.append(EnvEvent(kind="resumed", detail=(
            f"resumed after step {len(steps)}: a fresh JVM replayed {len(steps)} recorded actions in {replay_s:.1f} s "
            f"and every observation matched" + ("; a half-written last line was dropped" if dropped else ""))))
        return h

    def fork(self, parent, at_step: int) -> EpisodeHeader:
        """Start a new episode that continues `parent` (an agent_core.trace.Episode) after its step `at_step`,
        under this agent's preset and LLM: a fresh environment replays the parent's first `at_step` actions and
        each observation and score must equal the recorded one (else ReplayError, and the fork's trace says
        where). The replayed steps are copied into the new trace (`replayed=True`); the header names the
        parent. The fork starts in Swift with an empty buffer, its own Critic budget and no memory writes for
        the replayed steps (the parent's store already has them)."""
        h, steps = parent.header, parent.steps
        if not 0 <= at_step <= len(steps):
            raise ReplayError(f"cannot fork at step {at_step}: the recorded episode has steps 0-{len(steps)}")
        if at_step and steps[at_step - 1].done:
            raise ReplayError(f"the recorded episode ended at step {at_step} ({steps[at_step - 1].score:g} points): "
                            f"fork from an earlier step")
        if h.split and h.split not in ("train", "dev", "test"):
            raise ReplayError(f"unknown split {h.split!r} in {parent.path}")
        info = {"trace": str(parent.path), "run_id": h.run_id, "step": at_step,
                "preset": (h.config or {}).get("preset", "") if isinstance(h.config, dict) else ""}
        header = self.start(h.task, h.variation, split=h.split or None, parent=info)

        def copy(rec: StepRecord) -> None:
            c = dataclasses.replace(rec, replayed=True, env_events=self.env.drain_events(), mode_after="swift",
                                    buffer_after=[], buffer_after_sources=[])
            self.writer.append(c)
            self.records.append(c)

        try:
            replay_s = self._replay(steps[:at_step], copy)
        except ReplayError as e:
            self.finish("error", error=str(e))
            raise
        self.state.critic_calls, self.state.last_critic_step = 0, None  # the fork's own Critic budget
        header.parent["replay_s"] = round(replay_s, 3)  # in memory only: the header is already written
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
                                      error=error, resumed=list(self._resumed))
        if self.amm is not None:
            gen = lambda p: self.llm.chat(p, max_tokens=self.cfg.amm.reflection_max_tokens, temperature=0.0).text  # noqa: E731
            self.summary.memory = {**self.amm.stats.to_dict(), "store": str(self.amm.path or ""),
                                   "reflection": self.amm.end_episode(len(self.records), gen,
                                                                      self.reflect_in_background)}
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
    def _triggers(self, prop: SwiftProposal, action: str, valid: Sequence[str]) -> list[Trigger]:
        cc = self.cfg.controller
        out: list[Trigger] = []
        valid_keys = {action_key(v) for v in valid}
        if invalid_fires(prop, valid_keys, cc):
            out.append(Trigger("invalid", "invalid: Swift's action is not valid in the current state" + (
                "" if cc.invalid_rule == "top1" else
                f" (no valid action scores above {cc.invalid_min_score:g} per token)"),
                               {"swift_top1": prop.top1, "rule": cc.invalid_rule}))
        if cc.critical_review == "always":  # SwiftSage: the action or Swift's unconstrained guess is a focus
            critical = action.startswith(cc.critical_prefixes) or prop.top1.lower().startswith(cc.critical_prefixes)
        else:  # "unsure": the action to be taken is a focus, and Swift is not sure of its object
            sure = (prop.focus_margin is not None and prop.focus_margin >= self.cfg.swift.focus_margin
                    and action == prop.action)
            critical = action.startswith(cc.critical_prefixes) and not sure
        if critical:
            out.append(Trigger("critical", "critical: 'focus on ...' is a key decision that can end the task" + (
                f" (Swift's margin among the focus targets {prop.focus_margin:.2f} < {self.cfg.swift.focus_margin:.2f})"
                if prop.focus_margin is not None else ""), {"swift_action": action, "focus_margin": prop.focus_margin}))
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

    def _only_valid(self, action: str, valid: Sequence[str], w: _Step) -> str:
        """The last safeguard before the JVM: only a valid action of this state (in its canonical spelling) or a
        number answering the game's own menu is sent. Text from an observation, a memory or an LLM answer that
        is not one never reaches ScienceWorld; 'look around' (changes nothing) is sent instead, with a note."""
        if not self.cfg.controller.only_valid_actions or (
                self.last is not None and self.last.menu and (action == "" or action.isdigit())):
            return action
        canon = {action_key(v): v for v in valid}.get(action_key(action))
        if canon is not None:
            return canon
        w.notes.append(f"not sent to ScienceWorld: {action[:120]!r} is not a valid action here; 'look around' instead")
        return "look around"

    # ------------------------------------------------------------ parts of one step
    def _gate_ctx(self, valid: Sequence[str], step: int) -> GateContext:
        st, ss = self.state, self.state.swift_state
        live = step <= st.avoid_until  # a stagnation report's list and constraints still bind
        return GateContext(valid=valid, look=ss.look, inventory=ss.inventory, focus_done=st.focus_done,
                           focus_limit=self._focus_limit, avoid=st.avoid if live else (), no_focus=live and bool(st.avoid),
                           embedder=_LazyEmbedder(lambda: self.embedder))

    def _sage_context(self, trigger: Trigger | None, prop: SwiftProposal | None, action: str | None,
                      valid: Sequence[str] = ()) -> SageContext:
        ss = self.state.swift_state
        why = ""
        if trigger is not None:
            why = f"You are called because a switching rule fired: {trigger.rule}."
            if prop is not None:
                proposed = action or prop.action
                if trigger.name == "critical":
                    why += (f" My instinct (Swift, the fast policy) tells me to '{proposed}'. A wrong 'focus on' "
                            f"ends the task: check that this is the object the task asks for before committing.")
                elif trigger.name == "invalid":
                    why += f" My instinct (Swift) was '{prop.top1}', which the game does not accept here."
                else:
                    why += f" My instinct (Swift) proposes '{proposed}'."
        focus: list[str] = []
        if trigger is not None and trigger.name == "critical" and prop is not None:
            # Sage reviews the focus by comparing the targets in view, most likely first, not from scratch
            unnamed = {action_key(a) for a in prop.focus_unnamed}
            keep = {action_key(v) for v in valid}  # without the targets Sage's task check left out
            focus = [a for a, _p in prop.focus if action_key(a) in keep] or [
                a for a in valid if is_focus(a) and not never_a_focus_target(a) and action_key(a) not in unnamed]
        ranked = [a for a, _s in prop.valid_ranked] if prop is not None else []
        if valid and hasattr(self.swift, "rank") and self.cfg.sage.grounding == "numbered":
            ranked = self.swift.rank(ss, valid, self.cfg.sage.swift_choices)
        return SageContext(task=ss.task_description, look=ss.look, inventory=ss.inventory, score=ss.score,
                           time=len(self.records), history=self.state.sage_history, task_name=self.env.task.name,
                           worked_examples=self._examples, called_because=why, valid=list(valid),
                           swift_ranked=ranked, focus=focus)

    def _sage_options(self, w: _Step, valid: Sequence[str]) -> list[str]:
        """The valid actions Sage may choose from: without the focus targets the task does not name
        (sage.task_focus_check), which the step records once."""
        if not self.cfg.sage.task_focus_check:
            return list(valid)
        if w.sage_unnamed is None:
            w.sage_unnamed = unnamed_in_state(self.state.swift_state, valid)
        drop = {action_key(a) for a in w.sage_unnamed}
        return [v for v in valid if action_key(v) not in drop]

    def _unnamed_focus(self, w: _Step, valid: Sequence[str], action: str) -> bool:
        """A buffered LLM action that lands on a focus the task does not name is not played."""
        if not self.cfg.sage.task_focus_check or not is_focus(action):
            return False
        self._sage_options(w, valid)
        if action_key(action) not in {action_key(a) for a in w.sage_unnamed or []}:
            return False
        w.refused.append(action)
        w.notes.append(f"not played: '{action}' focuses on an object the task does not name (or names for later)")
        return True

    def _take_buffered(self, w: _Step, valid: Sequence[str]) -> tuple[str | None, str]:
        """Pop buffered actions until one passes Gate-1 (SRM) or maps onto a valid action (Baseline)."""
        st, srm = self.state, self.cfg.srm
        tries = 0
        while st.buffer and (not srm.enabled or tries < srm.gate1_max_buffer_tries):
            item: Buffered = st.buffer.popleft()
            tries += 1
            if srm.enabled:
                if item.gated_step == w.step:  # admitted by Gate-1 a moment ago, in this very state
                    if not self._unnamed_focus(w, valid, item.text):
                        return item.text, item.source
                else:
                    d = self.gate.check(item.text, item.source, self._gate_ctx(valid, w.step))
                    w.gate1.append(d)
                    if d.decision != DROP:
                        if not self._unnamed_focus(w, valid, d.result):
                            return d.result, item.source
                    else:
                        w.drops += 1
                        w.notes.append(f"Gate-1 dropped buffered action {item.text!r}: {d.detail}")
            else:
                ss = st.swift_state
                m = map_action(item.text, valid, self.cfg.sage.map_similarity_threshold, self.embedder,
                               context=ss.look + "\n" + ss.inventory)
                w.mappings.append(m)
                if m.mapped is not None:
                    if not self._unnamed_focus(w, valid, m.mapped):
                        return m.mapped, item.source
                else:
                    w.notes.append(f"buffered action {item.text!r} matches no valid action"
                                   f"{f' ({m.reason})' if m.reason else ''}")
            st.buffer_failures += 1
            if st.buffer_failures >= self.cfg.controller.buffer_fail_limit:
                w.notes.append(f"{st.buffer_failures} buffered actions failed in a row: back to Swift")
                st.buffer.clear()
                break
            if srm.enabled and w.drops >= srm.gate1_drops_for_sage and not w.sage_called:
                break  # two drops in one step: Sage decides this step (once)
        return None, ""

    def _call_sage(self, w: _Step, trigger: Trigger, valid: Sequence[str], prop: SwiftProposal | None = None,
                   swift_action: str | None = None) -> tuple[str | None, str]:
        st = self.state
        w.trigger, w.sage_called = trigger, True
        ctx = self._sage_context(trigger, prop, swift_action, self._sage_options(w, valid))
        if trigger.name == "critical" and self.cfg.controller.focus_review == "choose" and ctx.focus:
            return self._review_focus(w, ctx, prop, valid)
        if self.amm is not None:  # T4: every planning call gets at most 5 records, as hints
            with _timed(w, "amm"):
                failed = st.buffer_failures > 0 or any(r.action_valid is False or r.reward < 0
                                                       for r in self.records[-self.cfg.amm.recent_window:])
                r = self.amm.t4(w.step, self.last.room, st.swift_state.inventory, st.sage_history, failed)
            w.retrievals.append(r)
            ctx.memory = r.injected_text  # "" when nothing was found or the retrieval failed: the prompt is unmodified
        t0 = time.perf_counter()
        res = self.sage.think(ctx)
        w.timings["sage"] = w.timings.get("sage", 0.0) + time.perf_counter() - t0
        if self.amm is not None and (res.plan or res.actions):
            with _timed(w, "amm"):
                w.writes += self.amm.write_plan(w.step, res.plan, res.actions)
        w.llm_calls += res.llm_calls
        w.notes += res.problems
        if res.options:
            w.notes += [f"Sage picked '{a}'" + (f" (option {res.options.index(a) + 1} of {len(res.options)})"
                                                 if a in res.options else " (a command of its own, not in the list)")
                        for a in res.actions]
        st.steps_since_sage = 0
        if res.plan:
            st.plan = res.plan
        if res.error:
            w.notes.append(f"Sage failed ({res.error}); falling back to Swift's action")
            return None, ""
        if not res.actions:
            return None, ""
        st.buffer = deque(Buffered(a, "sage") for a in res.actions)
        st.mode, st.buffer_failures = "sage", 0
        w.buffer_before = list(res.actions)
        action, system = self._take_buffered(w, valid)
        if action is None:
            st.mode = "swift"
            w.notes.append("no buffered action passed; falling back to Swift's action")
        return action, system

    def _review_focus(self, w: _Step, ctx: SageContext, prop: SwiftProposal | None,
                      valid: Sequence[str]) -> tuple[str | None, str]:
        """The critical trigger under `controller.focus_review = choose`: Sage compares the focus targets in view
        and names one (it is buffered and checked like any Sage action) or says none is right yet (Swift's best
        non-focus action is taken instead). A failed or unreadable answer falls back to Swift's action."""
        st = self.state
        with _timed(w, "sage"):
            res = self.sage.review_focus(ctx)
        w.llm_calls += res.llm_calls
        w.notes += res.problems
        st.steps_since_sage = 0
        if res.error:
            w.notes.append(f"Sage failed ({res.error}); falling back to Swift's action")
            return None, ""
        if res.picked_how == ["none"]:
            # Swift's best other action; with none ranked, 'look around' (changes nothing) rather than the focus
            alt = self._best_non_focus(prop, valid) or "look around"
            w.notes.append(f"Sage's focus review: none of the {len(res.options)} focus targets is right yet; "
                           f"Swift's best other action instead: '{alt}'")
            return alt, "swift"
        if not res.actions:
            w.notes.append("Sage's focus review gave no focus target; falling back to Swift's action")
            return None, ""
        pick = res.actions[0]
        w.notes.append(f"Sage's focus review picked '{pick}' (option {res.options.index(pick) + 1} of "
                       f"{len(res.options)} focus targets)")
        st.buffer = deque([Buffered(pick, "sage")])
        st.mode, st.buffer_failures = "sage", 0
        w.buffer_before = [pick]
        action, system = self._take_buffered(w, valid)
        if action is None:
            st.mode = "swift"
        return action, system

    def _best_non_focus(self, prop: SwiftProposal | None, valid: Sequence[str]) -> str | None:
        ranked = [a for a, _s in prop.valid_ranked] if prop is not None else []
        others = [a for a in ranked if not is_focus(a)]
        if not others and hasattr(self.swift, "rank"):
            others = self.swift.rank(self.state.swift_state, [v for v in valid if not is_focus(v)], 3)
        return others[0] if others else None

    def _swift_turn(self, w: _Step, valid: Sequence[str]) -> tuple[str, str]:
        st, srm = self.state, self.cfg.srm
        t0 = time.perf_counter()
        prop = self.swift.propose(st.swift_state, valid)
        if srm.enabled and srm.loop_guard:
            prop = apply_loop_guard(prop, st.swift_state.history, srm.loop_guard_streak)
        w.timings["swift"] = time.perf_counter() - t0
        if self.amm is not None and action_key(prop.top1) not in {action_key(v) for v in valid}:
            prop = self._t1(w, valid, prop)
        w.prop = prop
        if prop.guard:
            w.notes.append(f"Swift loop guard: {prop.guard}")
        swift_action: str | None = prop.action
        forced: Trigger | None = None
        ranked = [prop.action] + [a for a, _s in prop.valid_ranked if a != prop.action]
        if srm.enabled:
            swift_action, dropped = None, []
            for i, cand in enumerate(ranked[: srm.gate1_max_swift_tries]):
                d = self.gate.check(cand, "swift", self._gate_ctx(valid, w.step), fallback=i > 0)
                w.gate1.append(d)
                if d.decision != DROP:
                    swift_action = d.result
                    break
                dropped.append(cand)
                w.drops += 1
                if len(dropped) >= srm.gate1_drops_for_sage:
                    break
            if swift_action is None:
                forced = Trigger("gate1_drops", f"Gate-1 dropped {len(dropped)} of Swift's actions in this step "
                                                f"(at {srm.gate1_drops_for_sage} drops Sage decides the step, once)",
                                 {"dropped": dropped})
        fired = self._triggers(prop, swift_action or prop.action, valid) if self.cfg.controller.sage_enabled else []
        if forced and self.cfg.controller.sage_enabled:
            fired.insert(0, forced)
        if fired and not w.sage_called and self._swift_forced(w, fired):
            if swift_action is not None and is_focus(swift_action) and any(f.name == "critical" for f in fired):
                # nobody reviews this unsure focus, and a wrong one ends the task: Swift's best other action
                alt = self._best_non_focus(prop, valid) or "look around"  # with none ranked: changes nothing
                w.notes.append(f"Swift is unsure of '{swift_action}' and Sage is not called this step: "
                               f"Swift's best other action '{alt}' instead")
                swift_action = alt
        elif fired and not w.sage_called:
            trigger = Trigger(fired[0].name, fired[0].rule, {**fired[0].evidence, "all_triggers": [f.name for f in fired]})
            action, system = self._call_sage(w, trigger, valid, prop, swift_action)
            if action is not None:
                return action, system
        if swift_action is not None:
            return swift_action, "swift"
        # SRM dropped every Swift candidate it tried and Sage gave nothing: the next admissible one, else look
        checked = {d.proposed for d in w.gate1 if d.source == "swift"}
        for cand in [c for c in ranked if c not in checked]:
            d = self.gate.check(cand, "swift", self._gate_ctx(valid, w.step), fallback=True)
            w.gate1.append(d)
            if d.decision != DROP:
                return d.result, "swift"
        w.notes.append("no Swift candidate passed Gate-1 and Sage gave nothing: 'look around' (changes nothing)")
        return "look around", "swift"

    def _swift_forced(self, w: _Step, fired: Sequence[Trigger]) -> bool:
        """SwiftSage's rule: after `sage_streak_limit` Sage calls in a row, Swift acts once whatever fired. The
        step records it as the switch `swift_forced`, with the triggers that were set aside."""
        limit = self.cfg.controller.sage_streak_limit
        if limit <= 0 or self.state.sage_streak < limit:
            return False
        again = w.trigger is not None and w.trigger.name == "swift_forced"  # already forced earlier in this step
        names = list(w.trigger.evidence["set_aside"]) if again else []
        rules = list(w.trigger.evidence["set_aside_rules"]) if again else []
        for f in fired:
            if f.name not in names:
                names.append(f.name)
                rules.append(f.rule)
        w.trigger = Trigger("swift_forced", f"back to Swift: Sage was called {self.state.sage_streak} times in a row "
                                            f"(at {limit} Swift acts once; `controller.sage_streak_limit`), so "
                                            f"{', '.join(names)} did not call Sage this step",
                            {"set_aside": names, "sage_calls_in_a_row": self.state.sage_streak,
                             "set_aside_rules": rules})
        if again:
            return True
        w.notes.append(f"Swift forced: {self.state.sage_streak} Sage calls in a row; set aside: {', '.join(names)}")
        return True

    def _t1(self, w: _Step, valid: Sequence[str], prop: SwiftProposal) -> SwiftProposal:
        """AMM T1: Swift's top action is invalid. Retrieve what worked, retry Swift once with at most 3 records
        in a short memory field; a valid retry replaces the proposal, otherwise the invalid trigger calls Sage."""
        st, srm = self.state, self.cfg.srm
        ss = st.swift_state
        with _timed(w, "amm"):
            r = self.amm.t1(w.step, self.last.room, ss.inventory, st.sage_history, prop.top1)
        w.retrievals.append(r)
        if r.injected_into != "swift":
            return prop
        with _timed(w, "swift"):
            retry = self.swift.propose(ss, valid, memory=r.injected_text)
            if srm.enabled and srm.loop_guard:
                retry = apply_loop_guard(retry, ss.history, srm.loop_guard_streak)
        ok = action_key(retry.top1) in {action_key(v) for v in valid}
        r.outcome = (f"Swift's retry with memory proposed '{retry.top1}': valid, it replaces '{prop.top1}'" if ok else
                     f"Swift's retry with memory proposed '{retry.top1}': still invalid, so Sage is called")
        w.notes.append(f"AMM T1: {r.outcome}")
        return retry if ok else prop

    def _answer_menu(self, w: _Step) -> tuple[str, str]:
        """ScienceWorld asked which of several objects was meant: answer with a number, deliberately."""
        st = self.state
        options = self.last.menu
        request = self.records[-1].action if self.records else ""
        if self.cfg.srm.enabled:
            # the same menu (same options) coming back means the last answer led nowhere: try another option
            tried = st.menu_tried.setdefault("|".join(sorted(options)), [])
            i, why = menu_choice(request, options, tried, task=st.swift_state.task_description)
            if i >= 0:
                tried.append(i)
            w.gate1.append(Gate1Decision(source="menu", proposed=request, decision="ACCEPT", result=str(i) if i >= 0
                                         else "", reason="MENU_CHOICE" if i >= 0 else "MENU_CANCEL",
                                         normalized=str(i), detail=why))
            chooser = "gate1"
        else:  # SwiftSage answers an ambiguity menu with its first option
            i, why, chooser = 0, "the first option (0), as SwiftSage does; Gate-1 is off in this preset", "default"
        w.menu = MenuChoice(request=request, options=list(options), chosen=i, chooser=chooser, why=why)
        # a blank answer cancels the menu (the game's own prompt says so)
        return (str(i) if i >= 0 else ""), (self.records[-1].system if self.records else "swift")

    def _critic_before_step(self, w: _Step, valid: Sequence[str]) -> None:
        """Serve a pending stagnation report: call the Critic if its rules allow, else record why not."""
        st, c = self.state, self.cfg.srm
        rep = st.pending_report
        if rep is None or not c.critic_enabled:
            return
        rstep = st.pending_report_step

        def skip(status: str, reason: str) -> None:
            w.critic = CriticCall(status=status, report_step=rstep, reason=reason, budget_used=st.critic_calls,
                                  budget=c.critic_budget, buffer_policy=c.critic_buffer_policy)
            st.pending_report = None

        if any(r.reward > 0 for r in self.records if r.step > rstep):
            return skip("cancelled", "a positive reward came after the report: the agent is making progress again")
        if st.critic_calls >= c.critic_budget:
            return skip("budget_exhausted", f"all {c.critic_budget} Critic calls of this episode are used")
        if st.last_critic_step is not None and w.step - st.last_critic_step <= c.critic_cooldown_steps:
            return skip("cooldown", f"the last Critic call was {w.step - st.last_critic_step} step(s) ago; the "
                                    f"cooldown is {c.critic_cooldown_steps} steps")
        if w.step <= st.critic_backoff_until:
            return skip("cooldown", f"backing off until step {st.critic_backoff_until + 1}: the last answer only "
                                    f"repeated recent actions")
        if c.critic_wait_for_empty_buffer and st.mode == "sage" and st.buffer:
            if w.step - rstep > c.critic_report_ttl_steps:
                return skip("expired", f"the buffer was still busy {c.critic_report_ttl_steps} steps after the "
                                       f"report (srm.critic_report_ttl_steps)")
            w.notes.append("a stagnation report is waiting for the action buffer to empty before the Critic runs")
            return
        ss = st.swift_state
        hist = [(r.action, r.observation, r.reward) for r in self.records]  # every step, no-ops included
        ctx = CriticContext(task=ss.task_description, look=ss.look, inventory=ss.inventory, score=ss.score,
                            time=len(self.records), history=hist, report=rep, valid=valid)
        if self.amm is not None:  # Full: the cached T2 / T3 records are the Critic's evidence
            ev = self.amm.critic_evidence(w.step)
            if ev is not None:
                w.retrievals.append(ev)
                ctx.memory = ev.injected_text
        t0 = time.perf_counter()
        call, ans = self.critic.ask(ctx)
        w.timings["critic"] = time.perf_counter() - t0
        w.llm_calls.append(call)
        st.critic_calls += 1
        st.last_critic_step = w.step
        st.pending_report = None
        cc = CriticCall(status="called", report_step=rstep, prompt=call.prompt, output=call.output,
                        diagnosis=ans.diagnosis, course_correction=ans.course_correction, actions=list(ans.actions),
                        buffer_policy=c.critic_buffer_policy, budget_used=st.critic_calls, budget=c.critic_budget,
                        latency_s=round(call.latency_s, 3), problems=list(ans.problems))
        w.critic = cc
        if call.error:
            cc.status, cc.error = "failed", call.error
            cc.reason = "the Critic's LLM call failed; the agent goes on without it"
            return
        kept, extra_moves = limit_moves(ans.actions, c.critic_max_moves)
        if extra_moves:
            cc.problems.append(f"more than {c.critic_max_moves} move(s): left out {extra_moves}")
        # The first action is checked in full now (it runs in this state); later ones only for what does not
        # depend on the state (they are checked in full when their turn comes, after the first has run).
        admitted: list[str] = []
        for a in kept:
            if not admitted:
                d = self.gate.check(a, "critic", self._gate_ctx(valid, w.step))
                w.gate1.append(d)
                text = d.result if d.decision != DROP else None
            else:
                d = self.gate.precheck(a, "critic")
                if d is not None:
                    w.gate1.append(d)
                text = None if d is not None else strip_decorations(a)[0]
            if text is not None and action_key(text) not in {action_key(x) for x in admitted}:
                admitted.append(text)
        recent = {action_key(r.action) for r in self.records[-c.critic_repeat_window:]}
        if not admitted:
            cc.reason = "none of its actions passed Gate-1: nothing entered the buffer"
            return
        if all(action_key(a) in recent for a in admitted):
            cc.status = "repeat_skipped"
            cc.reason = (f"every action repeats one of the last {c.critic_repeat_window} actions: skipped; the Critic "
                         f"backs off for {c.critic_repeat_backoff_steps} steps")
            st.critic_backoff_until = w.step + c.critic_repeat_backoff_steps
            return
        cc.admitted = admitted
        items = [Buffered(a, "critic", gated_step=w.step if i == 0 else 0) for i, a in enumerate(admitted)]
        if c.critic_buffer_policy == "append":
            st.buffer.extend(items)
        else:
            st.buffer = deque(items)
        st.mode, st.buffer_failures = "sage", 0
        w.buffer_before = [b.text for b in st.buffer]
        cc.reason = f"{len(admitted)} action(s) passed Gate-1 and entered the buffer ({c.critic_buffer_policy})"

    # ------------------------------------------------------------ one step
    def step(self) -> StepRecord:
        if self.writer is None or self.last is None:
            raise RuntimeError("start(task, variation) first")
        if self.done:
            raise RuntimeError("the episode is over")
        t_all = time.perf_counter()
        st, cc, srm = self.state, self.cfg.controller, self.cfg.srm
        w = _Step(step=len(self.records) + 1, buffer_before=[b.text for b in st.buffer])
        t0 = time.perf_counter()
        valid = self.env.valid_actions()
        w.timings["valid_actions"] = time.perf_counter() - t0
        plan_before = dict(st.plan)
        action: str | None = None
        system = "swift"

        if self.last.menu:
            action, system = self._answer_menu(w)
        else:
            if srm.enabled:
                self._critic_before_step(w, valid)
            if st.mode == "sage" and st.buffer:
                action, system = self._take_buffered(w, valid)
                if (action is None and srm.enabled and w.drops >= srm.gate1_drops_for_sage and not w.sage_called
                        and cc.sage_enabled):
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
        if self.amm is not None:  # the salience gate: at most one record for this step
            with _timed(w, "amm"):
                w.writes += self.amm.write_step(w.step, StepFacts(
                    task=self.env.task.name, task_description=st.swift_state.task_description,
                    variation=self.env.variation, room=room_before, inventory=inv_before,
                    action=w.menu.request if w.menu else action, observation=obs.text, reward=obs.reward,
                    score_before=score_before, score_after=obs.score, done=obs.done, history=list(st.sage_history)))
        # bookkeeping for the next step
        if system in ("sage", "critic") and not w.menu:
            failed = (not obs.action_valid) or obs.reward < 0
            st.buffer_failures = st.buffer_failures + 1 if failed else 0
            if st.buffer_failures >= cc.buffer_fail_limit:
                w.notes.append(f"{st.buffer_failures} buffered actions failed in a row: back to Swift next step")
                st.buffer.clear()
        # a focus counts when it happened: not when it only raised a menu, but when the menu answer chose it
        if (is_focus(action) and not obs.menu) or (w.menu and w.menu.chosen >= 0 and is_focus(w.menu.request)):
            st.focus_done += 1
        st.rewards.append(obs.reward)
        st.steps_since_sage += 1
        ss = st.swift_state
        ss.observe(action, obs.text, obs.reward, obs.room, obs.score, obs.look, obs.inventory)  # as in training
        st.sage_history.append((action, obs.text))
        if obs.reward > 0:
            st.avoid = []  # progress: the last report's list no longer binds Swift
        self.last = obs
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
            env_events=self.env.drain_events(), notes=w.notes,
            mode_after="sage" if st.mode == "sage" and st.buffer else "swift",
            memories_written=w.writes, retrievals=w.retrievals)
        if self.amm is not None and not obs.done:  # T2 / T3: retrieve and cache, logged in this step
            with _timed(w, "amm"):
                recent = (self.records + [rec])[-self.cfg.amm.recent_window:]
                invalid = [r.action for r in recent if r.action_valid is False]
                rec.retrievals += self.amm.after_step(rec.step, obs.room, obs.inventory, st.sage_history,
                                                      st.rewards, invalid)
        if srm.enabled and not obs.done:
            t0 = time.perf_counter()
            report = detect(self.records + [rec], srm, st.last_report_step)
            w.timings["stagnation"] = time.perf_counter() - t0
            if report is not None:
                rec.stagnation = report
                st.last_report_step = st.pending_report_step = rec.step
                st.pending_report = report
                st.avoid, st.avoid_until = list(report.actions_to_avoid), rec.step + srm.gate1_avoid_steps
        st.sage_streak = sage_streak_after(st.sage_streak, rec)
        w.timings["total"] = time.perf_counter() - t_all
        rec.timings = {k: round(v, 4) for k, v in w.timings.items()}
        self.writer.append(rec)
        self.records.append(rec)
        if obs.done:
            self.finish()
        return rec
