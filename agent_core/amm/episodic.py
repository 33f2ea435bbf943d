"""AMM, the adaptive episodic memory (docs/AGENT.md §5): salience-gated writes after every step, triggered
retrieval (T1-T4) and bounded injection, on the Generative Agents memory stream.

Memory is informational: it never picks an action. Every operation returns a typed record for the step
(`MemoryWrite`, `MemoryRetrieval`) and never raises: a store that fails (removed, unwritable, a broken
embedder) is recorded, the prompt stays unmodified and the run goes on.

One clock per store: `now` = the store's latest time when the episode started + the episode's step, so
recency tells this episode's memories from those of earlier episodes.
"""
from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from memory_store import MemoryStream
from memory_store.reflection import maybe_reflect, should_reflect

from ..actions import action_key, unseen_words
from ..config import Config
from ..swift.format import clean, fmt_num, fmt_reward
from ..trace import MemoryRetrieval, MemoryWrite, StepRecord
from .rewind import rewind_store
from .salience import StepFacts, content_key, importance, record_extra, record_text, salience
from .stats import EpisodeMemoryStats
from .store import StoreUnavailable, open_agent_store, open_server_store, prepare_store

__all__ = ["CRITIC_HEADER", "SAGE_HEADER", "SAGE_HEADER_THIS_EPISODE", "WORKED", "EpisodeMemoryStats",
           "EpisodicMemory"]

WORKED = ("success", "near-miss")
SAGE_HEADER = ("Memories from earlier episodes (hints only, they may be wrong: the current observation, inventory "
               "and valid actions come first; never focus on an object only because a memory names it):")
# amm.t4_this_episode = true: the block may hold this episode's own records, and the header says so
SAGE_HEADER_THIS_EPISODE = ("Memories from earlier episodes and from earlier in this one (hints only, they may be "
                            "wrong: the current observation, inventory and valid actions come first; never focus on "
                            "an object only because a memory names it):")
CRITIC_HEADER = "Evidence from memory (hints only; the current observation and the constraints come first):"


def names_only_in_view(extra: dict, look: str, inventory: str) -> bool:
    """A record's action names only objects in the room text or the inventory (T1's `in_view` rule)."""
    return bool(extra.get("action")) and not unseen_words(extra["action"], look, inventory, located=False)


class EpisodicMemory:
    """The agent's episodic memory for one store; `start_episode` before each episode. It keeps no episode state
    of its own: the caches (T2 / T3 evidence, T3's fired actions, what this episode wrote) are in the agent's state
    and come in as arguments, so a resumed episode has them exactly."""

    def __init__(self, cfg: Config, runs_dir: str | Path):
        self.cfg = cfg
        self.c = cfg.amm
        self.runs_dir = Path(runs_dir)
        self.path: Path | None = None
        self.stream: MemoryStream | None = None
        self.seeded_from = ""
        self.clock_start = 0.0
        self.task = self.task_description = self.run_id = ""
        self.variation = 0
        self.reflection_thread: threading.Thread | None = None
        self.llm_rate: Callable[[str], str] | None = None  # set by the agent when importance_mode is "llm"

    # ------------------------------------------------------------------ store
    def default_store_dir(self) -> Path:
        if self.c.store_dir:
            return Path(self.c.store_dir)
        return self.runs_dir / "memory" / ("agent" if self.c.warmup else "agent-empty")

    def _check(self) -> MemoryStream:
        if self.stream is None or self.path is None:
            raise StoreUnavailable("the memory store is not open")
        try:
            self.stream.heartbeat()
        except Exception as e:  # noqa: BLE001 - the directory removed, or the Chroma server gone
            raise StoreUnavailable(str(e) if isinstance(e, FileNotFoundError) else
                                   f"the memory server at {self.stream.path} is not answering: {type(e).__name__}: {e}")
        return self.stream

    def start_episode(self, run_id: str, task: str, task_description: str, variation: int,
                      clock: float | None = None) -> dict[str, Any]:
        """Open (and seed on first use) the store; returns what the episode header records. `clock`: a resumed
        episode's clock, from its header (the store's own latest time has moved on since)."""
        self.run_id, self.task, self.task_description, self.variation = run_id, task, task_description, variation
        info: dict[str, Any] = {}
        try:
            if self.cfg.memory.server_url:  # a shared Chroma server: this store is one collection there
                self.stream, self.seeded_from = open_server_store(self.default_store_dir().name, self.c.warmup,
                                                                  self.cfg.memory)
                self.path = self.stream.path
            else:
                dest = self.default_store_dir()
                self.path, self.seeded_from = prepare_store(dest, self.c.warmup, self.cfg.memory)
                self.stream = open_agent_store(self.path, self.cfg.memory)
            self.stream.refresh()
            self.stream.hold_access = True  # access times reach the disk with their step's record (commit_step)
            # one clock per store: continue after everything the store has seen
            self.clock_start = float(int(self.stream.latest_time)) + 1.0 if clock is None else float(clock)
            info = {"memories": len(self.stream), "clock": self.clock_start, "seeded_from": self.seeded_from}
        except Exception as e:  # noqa: BLE001 - memory is optional: the run goes on without it
            self.stream = None
            info = {"error": f"{type(e).__name__}: {e}"}
        return info

    def commit_step(self) -> None:
        """The step's record is on disk: its access times may follow."""
        if self.stream is not None:
            try:
                self.stream.flush()
            except Exception:  # noqa: BLE001 - the next write or retrieval reports a broken store
                pass

    def discard_step(self) -> None:
        """A step failed before its record was written: its held access times never reach the disk."""
        if self.stream is not None:
            try:
                self.stream.discard_unflushed()
            except Exception:  # noqa: BLE001 - a broken store says so at the next write or retrieval
                pass

    def rewind(self, steps: Sequence[StepRecord]) -> dict[str, Any]:
        """Bring the store back to where this run left it after its last recorded step (`start_episode` first,
        with the header's clock): see agent_core.amm.rewind."""
        return rewind_store(self.stream, self.run_id, steps) if self.stream is not None else {}

    def now(self, step: int) -> float:
        return self.clock_start + step

    # ------------------------------------------------------------------ writes
    def write_step(self, step: int, facts: StepFacts, written: dict[str, str]) -> list[MemoryWrite]:
        """The salience gate after an environment step: at most one record, nothing for an ordinary step.
        `written`: this episode's records so far (content key -> id), to write each content once."""
        s = salience(facts, self.c)
        if s is None:
            return []
        text = record_text(facts, s.tag, self.c)
        key = content_key(s.tag, facts.action, facts.observation, facts.room)
        w = MemoryWrite(tag=s.tag, rule=s.rule, why=s.why, text=text, now=self.now(step), content_key=key)
        if key in written:
            w.duplicate_of = written[key]
            w.why += f"; not written again: {w.duplicate_of} already holds it (same action, result and room)"
            return [w]
        t0 = time.perf_counter()
        try:
            stream = self._check()
            imp, src, err = importance(s, facts, self.c), "tag-rule", ""
            if self.c.importance_mode == "llm":
                imp, src, err = self._llm_importance(text, imp)
            m = stream.add(text, w.now, "observation", importance=imp, importance_source=src, importance_error=err,
                           tag=s.tag, task=self.task, episode=self.run_id,
                           extra=record_extra(facts, s, step, self.run_id))
            w.id, w.importance, w.importance_source = m.id, m.importance, src
        except Exception as e:  # noqa: BLE001
            w.error = f"{type(e).__name__}: {e}"
        w.elapsed_ms = round((time.perf_counter() - t0) * 1000, 2)
        return [w]

    def _llm_importance(self, text: str, fallback: float) -> tuple[float, str, str]:
        from memory_store.reflection import rate_importance

        if self.llm_rate is None:
            return fallback, "tag-rule", "importance_mode=llm but no LLM is attached: the tag rule stands in"
        r = rate_importance(text, self.llm_rate, self.cfg.memory, task=self.task)
        return (r.value, "llm", "") if not r.error else (fallback, "tag-rule", f"LLM rating failed: {r.error}")

    def write_plan(self, step: int, plan: dict[str, str], buffer: Sequence[str]) -> list[MemoryWrite]:
        """Sage's Q1-Q5 answers and its buffer become a `plan` memory (docs/AGENT.md §5.4)."""
        if not self.c.store_plans or not (plan or buffer):
            return []
        answers = " ".join(f"{q}: {clean(a, 160)}" for q, a in plan.items())
        text = f"PLAN ({self.task}, step {step}) | {answers} | BUFFER: {'; '.join(buffer) or '(none)'}"
        w = MemoryWrite(tag="plan", rule="plan", why="Sage planned: its answers and buffer are kept as a plan",
                        text=text, type="plan", now=self.now(step))
        t0 = time.perf_counter()
        try:
            m = self._check().add(text, w.now, "plan", importance=self.c.importance_plan, importance_source="tag-rule",
                                  tag="plan", task=self.task, episode=self.run_id,
                                  extra={"step": step, "run_id": self.run_id, "variation": self.variation})
            w.id, w.importance, w.importance_source = m.id, m.importance, "tag-rule"
        except Exception as e:  # noqa: BLE001
            w.error = f"{type(e).__name__}: {e}"
        w.elapsed_ms = round((time.perf_counter() - t0) * 1000, 2)
        return [w]

    # ------------------------------------------------------------------ retrieval
    def query(self, room: str, inventory: str, history: Sequence[tuple[str, str]], attempted: str = "") -> str:
        """A query in the records' own shape, so relevance compares like with like."""
        recent = " ; ".join(f"{clean(a, 40)} -> {clean(o, 60)}" for a, o in history[-3:]) or "(start)"
        q = (f"TASK: {clean(self.task_description, 160)} | ROOM: {room or '?'} | INVENTORY: {clean(inventory, 100)}"
             f" | RECENT: {recent}")
        return q + (f" | ACTION: {attempted}" if attempted else "")

    def _retrieve(self, trigger: str, why: str, query: str, tags: Sequence[str], step: int,
                  earlier_episodes_only: bool = False) -> MemoryRetrieval:
        r = MemoryRetrieval(trigger=trigger, why=why, query=query)
        t0 = time.perf_counter()
        try:
            stream = self._check()
            weights = {"recency": 0.0, "importance": 0.0, "relevance": 1.0} if self.c.scoring == "relevance" else None
            r.result = stream.retrieve(query, self.now(step), self.c.retrieve_pool, trigger=trigger, tags=list(tags),
                                       task=self.task if self.c.same_task_only else None, weights=weights,
                                       exclude_episode=self.run_id if earlier_episodes_only else None)
        except Exception as e:  # noqa: BLE001
            r.error = f"retrieval failed, nothing injected: {type(e).__name__}: {e}"
        r.elapsed_ms = round((time.perf_counter() - t0) * 1000, 2)
        return r

    def _picked(self, r: MemoryRetrieval, limit: int, per_type: dict[str, int] | None = None,
                order: Sequence[str] | None = None,
                keep: Callable[[dict], bool] | None = None) -> list[tuple[Any, dict]]:
        """Dedupe by content, cap per type, order by type then rank: (candidate, extra) pairs."""
        if r.result is None:
            return []
        seen: set[str] = set()
        counts: dict[str, int] = {}
        out = []
        for cand in r.result.top:
            mem = self.stream.get(cand.id) if self.stream is not None else None
            extra = mem.extra if mem is not None else {}
            key = (content_key(cand.tag, extra["action"], extra.get("result", ""), extra.get("room", ""))
                   if extra.get("action") else cand.description.strip().lower())
            if key in seen or (keep is not None and not keep(extra)):
                continue
            if per_type is not None and counts.get(cand.tag, 0) >= per_type.get(cand.tag, limit):
                continue
            seen.add(key)
            counts[cand.tag] = counts.get(cand.tag, 0) + 1
            out.append((cand, extra))
        if order:
            rank = {t: i for i, t in enumerate(order)}
            out.sort(key=lambda ce: (rank.get(ce[0].tag, len(rank)), ce[0].rank or 0))
        return out[:limit]

    def _swift_line(self, cand, extra: dict) -> str:
        a, o, t = self.c.swift_field_chars
        if not extra.get("action"):
            return clean(cand.description, a + o)
        # in_view: the old observation may name what is not here (another variation's objects): left out
        result = "" if self.c.swift_memory_objects == "in_view" else f" --> {clean(extra.get('result', ''), o)}"
        return (f"{clean(extra['action'], a)} ({fmt_reward(extra.get('reward', 0.0))}){result} "
                + clean(f"[{cand.tag}, score {fmt_num(extra.get('score_before', 0))} -> "
                        f"{fmt_num(extra.get('score_after', 0))}]", t))

    def _sage_line(self, cand, extra: dict) -> str:
        if extra.get("action"):
            other = (self.c.mark_other_variations and "variation" in extra
                     and int(extra["variation"]) != int(self.variation))
            s = (f"- [{cand.tag}{', another variation' if other else ''}] in {extra.get('room') or '?'}: "
                 f"{extra['action']} --> {extra.get('result', '')} "
                 f"({fmt_reward(extra.get('reward', 0.0))}: {fmt_num(extra.get('score_before', 0))} -> "
                 f"{fmt_num(extra.get('score_after', 0))})")
        else:
            s = f"- [{cand.tag or cand.type}] {cand.description}"
        return clean(s, self.c.sage_record_chars)

    def t1(self, step: int, room: str, inventory: str, history: Sequence[tuple[str, str]],
           swift_top1: str, look: str = "") -> MemoryRetrieval:
        """Swift's top action is invalid: the records that worked, as a short field for Swift's retry. With
        `swift_memory_objects = in_view`, only records whose action names objects in `look` or `inventory`."""
        r = self._retrieve("T1", f"Swift's top action '{swift_top1}' is not valid here",
                           self.query(room, inventory, history, swift_top1), WORKED, step)
        try:
            picked = self._picked(r, self.c.swift_max_records,
                                  keep=(lambda extra: names_only_in_view(extra, look, inventory))
                                  if self.c.swift_memory_objects == "in_view" and (look or inventory) else None)
            if picked:
                r.injected_ids = [c.id for c, _ in picked]
                r.injected_text = "; Memory: [" + " | ".join(self._swift_line(c, e) for c, e in picked) + "]"
                if self.c.swift_injection:
                    r.injected_into = "swift"
                else:
                    r.outcome = "retrieved and logged only: Swift T1 injection is off in this configuration"
            elif r.error is None:
                r.outcome = "no record to inject: Swift is not retried"
        except Exception as e:  # noqa: BLE001
            r.error, r.injected_text, r.injected_into = f"formatting failed: {type(e).__name__}: {e}", "", ""
        return r

    def t4(self, step: int, room: str, inventory: str, history: Sequence[tuple[str, str]],
           actions_failed: bool) -> MemoryRetrieval:
        """Every Sage planning call: at most `sage_max_records` hints, worked records first."""
        tags = list(WORKED) + ["insight", "plan"] + (["avoidance"] if actions_failed else [])
        why = "Sage is planning" + (" (recent actions failed: avoidance records too)" if actions_failed else "")
        mine = self.c.t4_this_episode
        why += "" if mine else "; memories of earlier episodes only"
        header = SAGE_HEADER_THIS_EPISODE if mine else SAGE_HEADER
        r = self._retrieve("T4", why, self.query(room, inventory, history), tags, step, earlier_episodes_only=not mine)
        try:
            per_type = {**{t: self.c.sage_max_records for t in tags}, **{
                k: int(v) for k, _, v in (s.partition(":") for s in self.c.sage_max_per_type)}}
            picked = self._picked(r, self.c.sage_max_records, per_type, self.c.sage_type_order)
            lines: list[str] = []
            for cand, extra in picked:
                line = self._sage_line(cand, extra)
                if len(header) + sum(len(x) + 1 for x in lines) + len(line) > self.c.sage_block_chars:
                    break  # the block cap drops whole records, from the end of the fixed order
                lines.append(line)
                r.injected_ids.append(cand.id)
            if lines:
                r.injected_text, r.injected_into = header + "\n" + "\n".join(lines), "sage"
        except Exception as e:  # noqa: BLE001
            r.error, r.injected_text, r.injected_into, r.injected_ids = \
                f"formatting failed: {type(e).__name__}: {e}", "", "", []
        return r

    def after_step(self, step: int, room: str, inventory: str, history: Sequence[tuple[str, str]],
                   rewards: Sequence[float], invalid_actions: Sequence[str],
                   t3_fired: Sequence[str]) -> list[MemoryRetrieval]:
        """T2 (no progress for N steps) and T3 (the same invalid action again, once per action: `t3_fired`):
        retrieve for the Critic's evidence (the agent's state caches them), never inject."""
        out: list[MemoryRetrieval] = []
        since = 0
        for x in reversed(rewards):
            if x > 0:
                break
            since += 1
        for n in self.c.t2_no_progress_steps:
            if since == n:  # each crossing fires once per stretch without progress
                r = self._retrieve("T2", f"no progress for {n} steps", self.query(room, inventory, history),
                                   WORKED, step)
                r.outcome = "cached: the Critic's evidence slot (Full) uses it; never injected otherwise"
                out.append(r)
        if invalid_actions:
            last = invalid_actions[-1]
            k = action_key(last)
            n = sum(1 for a in invalid_actions if action_key(a) == k)
            if n >= self.c.t3_repeat_invalid and k not in t3_fired:
                r = self._retrieve("T3", f"the invalid action '{last}' was repeated ({n} times)",
                                   self.query(room, inventory, history, last), ["avoidance"], step)
                r.outcome = "cached: the Critic's evidence slot (Full) uses it; never injected otherwise"
                r.subject = k
                out.append(r)
        return out

    def critic_evidence(self, step: int, worked: MemoryRetrieval | None,
                        avoid: MemoryRetrieval | None) -> MemoryRetrieval | None:
        """Full: up to 3 records that worked (from the latest T2) + 1 to avoid (from the latest T3)."""
        if worked is None and avoid is None:
            return None
        r = MemoryRetrieval(trigger="critic", why="evidence for the Critic from the cached T2 / T3 retrievals",
                            query="", result=(worked or avoid).result)
        try:
            picked = (self._picked(worked, self.c.critic_worked_records) if worked else []) + \
                     (self._picked(avoid, self.c.critic_avoid_records) if avoid else [])
            if picked:
                r.injected_ids = [c.id for c, _ in picked]
                r.injected_text = CRITIC_HEADER + "\n" + "\n".join(self._sage_line(c, e) for c, e in picked)
                r.injected_into = "critic"
            r.outcome = "from " + ", ".join(f"the {t} retrieval" for t, x in (("T2", worked), ("T3", avoid)) if x)
        except Exception as e:  # noqa: BLE001
            r.error, r.injected_text, r.injected_into = f"formatting failed: {type(e).__name__}: {e}", "", ""
        return r

    # ------------------------------------------------------------------ reflection
    @staticmethod
    def statement(m) -> str:
        """A memory as one short line for the reflection prompts."""
        e = m.extra or {}
        if e.get("action"):
            return (f"[{m.tag}] {e['action']} --> {clean(e.get('result', ''), 90)} ({fmt_reward(e.get('reward', 0.0))}, "
                    f"{m.task})")
        return f"[{m.tag or m.type}] {clean(m.description, 200)}"

    def reflection_status(self) -> tuple[bool, float]:
        try:
            stream = self._check()
            return should_reflect(stream), stream.importance_since_last_reflection()
        except Exception:  # noqa: BLE001
            return False, 0.0

    def end_episode(self, steps: int, generate: Callable[[str], str] | None, background: bool,
                    ended: bool = True) -> str:
        """Reflection between episodes (GA): when the summed importance since the last one exceeds the
        threshold. In the background when asked (the app), so no step waits minutes for it. Not after a stop or
        an error (`ended` False): that episode may be resumed, and a reflection then would come twice and touch
        memories a resume cannot put back."""
        if self.stream is not None:  # the episode is over: nothing left to hold back
            self.commit_step()
            self.stream.hold_access = False
        if self.c.reflection == "off" or self.stream is None:
            return "reflection is off"
        if not ended:
            return "not run: the episode was stopped before its end (it may be resumed)"
        due, total = self.reflection_status()
        thr = self.cfg.memory.reflection_threshold
        if not due:
            return f"not due: importance since the last reflection {total:.0f} <= {thr:g}"
        if generate is None:
            return f"due ({total:.0f} > {thr:g}) but no LLM is attached"
        stream, now, task, run_id = self.stream, self.now(steps) + 0.5, self.task, self.run_id
        # the log lives beside a local store; a store on a Chroma server logs under this app's runs/memory
        path = self.path if not stream.remote else self.runs_dir / "memory" / f"server-{stream.config.collection}"

        def job() -> None:
            t0 = time.time()
            try:
                # the window and the compact statements keep the prompt inside a small CPU model's context
                mcfg = dataclasses.replace(self.cfg.memory, reflection_recent_window=self.c.reflection_window)
                res = maybe_reflect(stream, generate, now, task=task, episode=run_id, config=mcfg,
                                    importance=self.c.importance_reflection if self.c.importance_mode == "tag" else None,
                                    tag="insight", statement=self.statement)
                entry = {"after_run": run_id, "task": task, "started": t0, "seconds": round(time.time() - t0, 1),
                         "store_clock": now, **(res.to_dict() if res else {"skipped": "no longer due"})}
            except Exception as e:  # noqa: BLE001
                entry = {"after_run": run_id, "task": task, "started": t0, "error": f"{type(e).__name__}: {e}"}
            try:
                Path(path).mkdir(parents=True, exist_ok=True)
                with open(Path(path) / "reflections.jsonl", "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(entry, default=str) + "\n")
            except OSError:
                pass

        if background:
            self.reflection_thread = threading.Thread(target=job, name="amm-reflection", daemon=True)
            self.reflection_thread.start()
            return f"due ({total:.0f} > {thr:g}): reflecting in the background (log: reflections.jsonl)"
        job()
        return f"due ({total:.0f} > {thr:g}): reflected after the episode (log: reflections.jsonl)"
