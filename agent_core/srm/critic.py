"""SRM's bounded Critic (docs/AGENT.md §6.3): called only on a stagnation report, within a budget and a
cooldown (the controller enforces when); it reads the state, the recent trajectory, the report and its
constraints, and answers DIAGNOSIS / COURSE_CORRECTION / ACTIONS. Its actions are parsed here; the
controller passes each through Gate-1 and puts the admitted ones into the same FIFO action buffer: the
Critic never executes anything itself. The prompt is a text file (prompts/critic.txt)."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..actions import (action_key, argument_of, is_focus, is_move, self_referential, treats_room_as_object,
                       unseen_words, verb_of)
from ..config import SRMConfig
from ..llm import LLMBackend, failure_of
from ..sage import parse_actions
from ..swift.format import clean
from ..trace import LLMCall, StagnationReport

PROMPT = Path(__file__).resolve().parent / "prompts" / "critic.txt"


@dataclass
class CriticContext:
    task: str
    look: str
    inventory: str
    score: float
    time: int
    history: list[tuple[str, str, float]]  # (action, observation, reward), oldest first
    report: StagnationReport
    valid: Sequence[str]
    memory: str = ""  # AMM's evidence block (header + records that worked / to avoid), inserted verbatim
    swift_ranked: Sequence[str] = ()  # Swift's best valid actions, best first (srm.critic_valid_order = ranked)
    plan: str = ""  # Sage's current plan, if any: similarity to it orders the rest


@dataclass
class CriticAnswer:
    diagnosis: str = ""
    course_correction: str = ""
    actions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


_LABEL = re.compile(r"(?im)^[\s>*#_-]*\**\s*(diagnosis|course[ _-]?correction|actions?)\s*\**\s*[:.-]\**\s*")


def parse_answer(text: str, max_actions: int) -> CriticAnswer:
    """DIAGNOSIS / COURSE_CORRECTION / ACTIONS from a messy reply (markdown, missing labels, prose)."""
    ans = CriticAnswer()
    marks = [(m.start(), m.end(), m.group(1).lower().replace(" ", "_").replace("-", "_")) for m in
             _LABEL.finditer(text or "")]
    parts: dict[str, str] = {}
    for i, (_s, e, name) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        key = "actions" if name.startswith("action") else "course_correction" if name.startswith("course") else name
        parts.setdefault(key, text[e:end])
    ans.diagnosis = " ".join(parts.get("diagnosis", "").split())
    ans.course_correction = " ".join(parts.get("course_correction", "").split())
    for label in ("diagnosis", "course_correction", "actions"):
        if label not in parts:
            ans.problems.append(f"no {label.upper()} section")
    body = parts.get("actions")
    if body is None:  # fall back to numbered lines anywhere in the reply
        body = "\n".join(ln for ln in (text or "").splitlines() if re.match(r"^\s*\d+\s*[.):]", ln))
    # the same line parser as Sage's grounding (bullets, numbering, trailing comments, over-long prose)
    ans.actions, problems = parse_actions(body, max_actions)
    ans.problems += problems
    return ans


_STOP = {"the", "a", "an", "to", "of", "your", "is", "task", "and", "in", "on", "it", "you", "when", "are", "done",
         "containing", "into", "with", "for", "that", "this", "be", "then", "first"}


def rank_valid(valid: Sequence[str], report: StagnationReport, task: str, limit: int, swift_ranked: Sequence[str] = (),
               plan: str = "", look: str = "", inventory: str = "", per_group: int = 2) -> list[str]:
    """The valid actions the Critic may choose from, in an order that means something (`critic_valid_order =
    ranked`): no focus, none to avoid, nothing the game only generates (`use axe on axe`, `pour cup into
    kitchen`); Swift's own ranking first, then actions on objects in view before those out of sight, then the
    words they share with the task and the plan. At most `per_group` actions with the same verb and first object
    (five `dunk cup containing orange juice in ...` lines say one thing)."""
    avoid = {action_key(a) for a in report.actions_to_avoid}
    want = set(re.findall(r"[a-z]+", f"{task} {plan}".lower())) - _STOP
    swift = {action_key(a): i for i, a in enumerate(swift_ranked)}
    rows = []
    seen: set[str] = set()
    for i, v in enumerate(valid):
        k = action_key(v)
        if k in seen or k in avoid or is_focus(v) or self_referential(v) or treats_room_as_object(v):
            continue
        seen.add(k)
        hidden = bool(look or inventory) and bool(unseen_words(v, look, inventory))
        overlap = len(want & set(re.findall(r"[a-z]+", v.lower())))
        rows.append((swift.get(k, len(swift)), hidden, -overlap, i, v))
    rows.sort()
    out: list[str] = []
    groups: dict[tuple[str, str], int] = {}
    for *_key, v in rows:
        g = (verb_of(v), (re.split(r"\s+(?:to|in|into|on|onto)\s+", argument_of(v)) or [""])[0])
        if groups.get(g, 0) >= per_group and action_key(v) not in swift:
            continue
        groups[g] = groups.get(g, 0) + 1
        out.append(v)
        if len(out) >= limit:
            break
    return out


def filter_valid(valid: Sequence[str], report: StagnationReport, task: str, limit: int) -> list[str]:
    """The valid actions the Critic may choose from: no focus, none to avoid, most relevant to the task
    first (shared words with the task description), then the game's order."""
    avoid = {action_key(a) for a in report.actions_to_avoid}
    task_words = set(re.findall(r"[a-z]+", task.lower())) - {"the", "a", "an", "to", "of", "your", "is", "task",
                                                             "and", "in", "on", "it", "you", "when", "are", "done"}
    seen: set[str] = set()
    rows = []
    for i, v in enumerate(valid):
        k = action_key(v)
        if k in seen or k in avoid or is_focus(v):
            continue
        seen.add(k)
        overlap = len(task_words & set(re.findall(r"[a-z]+", v.lower())))
        rows.append((-overlap, i, v))
    rows.sort()
    return [v for _o, _i, v in rows[:limit]]


class Critic:
    def __init__(self, llm: LLMBackend, cfg: SRMConfig | None = None, temperature: float = 0.0):
        self.llm = llm
        self.cfg = cfg or SRMConfig()
        self.temperature = temperature
        self.template = PROMPT.read_text()

    def prompt(self, ctx: CriticContext) -> str:
        c = self.cfg
        rows = [f"- {a} (reward {r:+g}) --> {clean(o, c.critic_obs_chars)}"
                for a, o, r in ctx.history[-c.critic_history_k:]]
        rep = ctx.report
        report = "\n".join([f"- {m}: {w}" for m, w in zip(rep.modes, rep.explanation)] +
                           [f"- actions to avoid: {', '.join(repr(a) for a in rep.actions_to_avoid) or '(none)'}"])
        memory = f"\n{ctx.memory}\n" if ctx.memory else ""  # AMM's evidence block, with its own header
        valid = (rank_valid(ctx.valid, rep, ctx.task, c.critic_valid_list_max, ctx.swift_ranked, ctx.plan, ctx.look,
                            ctx.inventory) if c.critic_valid_order == "ranked" else
                 filter_valid(ctx.valid, rep, ctx.task, c.critic_valid_list_max))
        return self.template.format(task=ctx.task, look=clean(ctx.look, 900), inventory=clean(ctx.inventory, 200),
                                    score=int(ctx.score), time=ctx.time, history="\n".join(rows) or "(none)",
                                    report=report, constraints="\n".join(f"- {x}" for x in rep.constraints),
                                    memory=memory, valid="\n".join(valid), max_actions=c.critic_max_actions,
                                    max_moves=c.critic_max_moves)

    def ask(self, ctx: CriticContext) -> tuple[LLMCall, CriticAnswer]:
        """One call; an LLM failure comes back in `LLMCall.error`, never raised."""
        prompt = self.prompt(ctx)
        call = LLMCall(purpose="critic", backend=self.llm.name, model=self.llm.model or "", prompt=prompt)
        t0 = time.perf_counter()
        try:
            r = self.llm.chat(prompt, max_tokens=self.cfg.critic_max_tokens, temperature=self.temperature)
            call.output, call.prompt_tokens, call.completion_tokens = r.text, r.prompt_tokens, r.completion_tokens
            call.latency_s, call.model = r.latency_s, r.model
            call.cpu_threads = int(r.extra.get("threads", 0) or 0)
            call.cached_tokens = int(r.extra.get("cached_tokens", 0) or 0)
            call.cache_state = r.extra.get("cache_state", "")
        except Exception as e:  # noqa: BLE001 - LLMError, or e.g. a RuntimeError inside llama.cpp: never raised
            call.error, call.error_kind = failure_of(e, self.llm.name)
            call.latency_s = time.perf_counter() - t0
            return call, CriticAnswer()
        return call, parse_answer(call.output, self.cfg.critic_max_actions)


def limit_moves(actions: Sequence[str], max_moves: int) -> tuple[list[str], list[str]]:
    """Keep at most `max_moves` moves (the first ones); returns (kept, dropped)."""
    kept, dropped, moves = [], [], 0
    for a in actions:
        if is_move(a):
            moves += 1
            if moves > max_moves:
                dropped.append(a)
                continue
        kept.append(a)
    return kept, dropped
