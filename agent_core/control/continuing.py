"""Going on from a recorded episode: replay (the same transition as the live step, checked against the
record), resume in place, fork into a new trace."""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Sequence

from ..episode import ReplayError, apply, check, digest, resume_problem
from ..episode.replay import first_difference, fork_state, provenance_changes, same_settings
from ..provenance import machine, seed_everything
from ..trace import EnvEvent, EpisodeHeader, StepRecord, TraceWriter


class Continuing:
    """Part of `agent_core.controller.Agent` (a mixin: it reads the agent's attributes)."""

    def _replay(self, steps: Sequence[StepRecord], on_replayed: Callable[[StepRecord], None],
                checked: bool = True) -> float:
        """Replay recorded steps in the environment, checking every observation and score against the record, and
        rebuild the agent's state with the same transition as the live step (`apply`), checking it against each
        record's state digest when `checked` (the same settings). Raises ReplayError at the first divergence.
        Returns the seconds it took."""
        t0 = time.perf_counter()
        for rec in steps:
            obs = self.env.step(rec.action)
            if obs.text.strip() != rec.observation.strip() or obs.score != rec.score:
                self.last = obs
                raise ReplayError(f"replay diverged at step {rec.step} ('{rec.action}'): recorded {rec.score:g} "
                                  f"points and {rec.observation[:160]!r}, replayed {obs.score:g} points and "
                                  f"{obs.text[:160]!r}")
            state = apply(self.state, rec, self.cfg)
            wrong = check(state, rec) if checked else []
            if wrong:
                self.last = obs
                raise ReplayError(f"replay diverged at step {rec.step}: the rebuilt state differs from the recorded "
                                  f"one ({'; '.join(wrong)})")
            self.state, self.last = state, obs
            on_replayed(rec)
        return time.perf_counter() - t0

    def resume(self, ep, strict: bool = False) -> EpisodeHeader:
        """Continue an interrupted episode (agent_core.trace.Episode: no summary, or one that says stopped or
        error) in its own trace: the finished steps stay byte for byte (a half-written last line is dropped), a
        fresh JVM replays them and checks every observation and the rebuilt state against the record, the memory
        store goes back to where the last recorded step left it, and the agent goes on from there exactly as an
        uninterrupted run would. Code or settings that differ from the recording are noted in the summary
        (`strict`: refused)."""
        h, steps = ep.header, ep.steps
        problem = resume_problem(ep)
        if problem:
            raise ReplayError(problem)
        changes = provenance_changes(h.code, h.config_hash, self.code, self.config_hash, h.machine, machine())
        if strict and changes:
            raise ReplayError("the code, settings or machine changed since this episode was recorded (" +
                              "; ".join(changes) +
                              "); resume without strict mode to continue anyway")
        self.finish("stopped")
        if self.env.cfg.step_limit != self.cfg.env.step_limit:
            self.env.cfg = dataclasses.replace(self.env.cfg, step_limit=self.cfg.env.step_limit)
        obs = self.env.reset(h.task, h.variation, split=h.split or None, look=h.initial_look or None)
        reloads = self.env.reorders
        self.env.events = [e for e in self.env.events if e.kind != "reloaded"]  # the resume's own note says it
        if obs.look.strip() != (h.initial_look or obs.look).strip():
            raise ReplayError(f"replay diverged at step 0: the task starts in another state than recorded "
                              f"({first_difference(obs.look, h.initial_look)})")
        self._init_episode(obs)
        self.llm.new_episode()
        seed_everything(self.cfg.seed)
        if self.amm is not None:
            self.amm.start_episode(h.run_id, h.task, obs.task_description, h.variation,
                                   clock=(h.memory_at_start or {}).get("clock"))
        dropped = ep.truncated_tail is not None
        fork_at = int(h.parent.get("step", 0)) if h.parent else 0

        def replayed(rec: StepRecord) -> None:
            self.records.append(rec)
            if h.parent and rec.step == fork_at:  # a fork's own state began here (Agent.fork)
                self.state = fork_state(self.state, bool(h.parent.get("same_settings")))

        if h.parent and fork_at == 0:
            self.state = fork_state(self.state, bool(h.parent.get("same_settings")))
        replay_s = self._replay(steps, replayed)
        # only once the replay matched: a divergence changes neither the trace nor the store
        rewound = self.amm.rewind(steps) if self.amm is not None else {}
        self.writer = TraceWriter.reopen(ep.path, len(steps))  # after the replay: a divergence changes no file
        prior = list(ep.summary.resumed) if ep.summary is not None else []
        # the LLM's prompt cache as the run left it after its last step (a prompt read over another prefix can be
        # answered differently): kept beside the trace by Agent._keep_llm_cache
        llm_cache = self.llm.load_cache_file(ep.path, len(steps)) if steps else ""
        exact = bool(not changes and (not steps or steps[-1].after is not None) and not llm_cache)
        info = {"at_step": len(steps), "at": time.time(), "replay_s": round(replay_s, 3),
                "dropped_half_written_line": dropped,
                "previous_end": ep.summary.reason if ep.summary is not None else "killed (no summary)",
                "exact": exact, "changes": changes, "memory": rewound, "llm_cache": llm_cache}
        self._resumed = prior + [info]
        self.env.events.append(EnvEvent(kind="resumed", detail=(
            f"resumed after step {len(steps)}: a fresh JVM replayed {len(steps)} recorded actions in {replay_s:.1f} s "
            f"and every observation and state matched" + ("; a half-written last line was dropped" if dropped else "")
            + (f"; the memory store lost {rewound['removed']} record(s) of the unfinished step" if rewound.get("removed")
               else "")
            + (f"; the task was loaded {reloads} more time(s) until it listed its objects in the recorded order"
               if reloads else "")
            + (f"; the LLM starts from an empty prompt cache ({llm_cache}), so its answers can differ from the "
               f"uninterrupted run's" if llm_cache else "")
            + (f"; changed since recorded: {'; '.join(changes)}" if changes else "")
            + ("" if not steps or steps[-1].after is not None else
               "; the trace predates the state digest, so the buffer's failure count and a waiting Critic report "
               "could not be rebuilt"))))
        return h

    def fork(self, parent, at_step: int, branch: dict | None = None, run_id: str | None = None) -> EpisodeHeader:
        """Start a new episode that continues `parent` (an agent_core.trace.Episode) after its step `at_step`,
        under this agent's preset and LLM: a fresh environment replays the parent's first `at_step` actions and
        each observation and score must equal the recorded one (else ReplayError, and the fork's trace says
        where). The replayed steps are copied into the new trace (`replayed=True`); the header names the parent.
        Under the parent's own settings (the LLM aside) the fork keeps the parent's whole state, buffer and Critic
        budget included, and goes on as the parent did; under other settings it starts in Swift with an empty
        buffer and its own Critic budget (episode.replay.fork_state). No memory is written for the replayed steps
        (the parent's store already has them). `branch`: what a rollout plays from here (agent_core.rollout), kept
        in the header's `parent` as `branch`."""
        h, steps = parent.header, parent.steps
        if not 0 <= at_step <= len(steps):
            raise ReplayError(f"cannot fork at step {at_step}: the recorded episode has steps 0-{len(steps)}")
        if at_step and steps[at_step - 1].done:
            raise ReplayError(f"the recorded episode ended at step {at_step} ({steps[at_step - 1].score:g} points): "
                            f"fork from an earlier step")
        if h.split and h.split not in ("train", "dev", "test"):
            raise ReplayError(f"unknown split {h.split!r} in {parent.path}")
        same = same_settings(h.config, self.cfg.to_record())
        info = {"trace": str(parent.path), "run_id": h.run_id, "step": at_step,
                "preset": (h.config or {}).get("preset", "") if isinstance(h.config, dict) else "",
                "same_settings": same}
        if branch:
            info["branch"] = dict(branch)
        header = self.start(h.task, h.variation, split=h.split or None, run_id=run_id, parent=info,
                            look=h.initial_look or None)
        if h.initial_look and self.last.look.strip() != h.initial_look.strip():
            error = (f"replay diverged at step 0: the task starts in another state than recorded "
                     f"({first_difference(self.last.look, h.initial_look)})")
            self.finish("error", error=error)
            raise ReplayError(error)
        if at_step == 0:
            self.state = fork_state(self.state, same)

        def copy(rec: StepRecord) -> None:
            c = dataclasses.replace(rec, replayed=True, env_events=self.env.drain_events(),
                                    after=rec.after if same else digest(self.state))
            self.writer.append(c)
            self.records.append(c)
            if rec.step == at_step:
                self.state = fork_state(self.state, same)

        try:
            replay_s = self._replay(steps[:at_step], copy, checked=same)
        except ReplayError as e:
            self.finish("error", error=str(e))
            raise
        header.parent["replay_s"] = round(replay_s, 3)  # in memory only: the header is already written
        return header
