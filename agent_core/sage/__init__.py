"""Sage, System 2 (docs/AGENT.md §3): plan (Q1-Q5), ground the plan into an action buffer, and map
each buffered action onto the current valid-action set.

The prompts are text files in prompts/ so a teacher can read them and the app can show them. Every Sage prompt
starts with the same context (prompts/context.txt: instructions, a worked example, the task, then what changes step
to step), and the pick is the next turn of the plan's own conversation (prompts/choose_turn.txt): a local llama.cpp
model (or a vLLM prefix cache) re-uses what it has already read and reads only what is new.

Grounding is numbered by default (`sage.grounding="numbered"`, choices.py): Sage picks commands from a short
numbered list of valid actions (`sage.choose_reply="command"` shows `- command` lines and reads the command copied
back). `"free"` asks for free-form commands (prompts/ground.txt) and maps them.
Small local models write messy answers ("**Q1.** ...", numbered lists, prose such as "fill it with
water at the sink"), so parsing is tolerant and records what failed; mapping goes normalize -> exact
-> nearest valid action by sentence-embedding similarity above a threshold.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..actions import (MOVE_VERBS, action_key, argument_of, canonical, is_focus, names_everything, normalize,
                       same_verb_class, self_referential, strip_decorations, verb_of)
from ..config import SageConfig
from ..llm import LLMBackend, ScoringUnsupported, failure_of
from ..llm.base import Message, prompt_text
from ..trace import ActionMapping, LLMCall
from .choices import build_choices, format_choices, parse_choices, task_names

PROMPTS = Path(__file__).resolve().parent / "prompts"
QUESTIONS = ("Q1", "Q2", "Q3", "Q4", "Q5")


def load_prompt(name: str) -> str:
    return (PROMPTS / f"{name}.txt").read_text()


# ------------------------------------------------------------------ parsing

_Q_RE = re.compile(r"(?im)^[\s>*#_-]*\**\s*(?:q(?:uestion)?\s*([1-5])|([1-5]))\s*\**\s*[:.)\-]\**\s*")


def parse_plan(text: str) -> tuple[dict[str, str], list[str]]:
    """Q1..Q5 answers from a messy reply; returns (answers, problems)."""
    marks = [(m.start(), m.end(), m.group(1) or m.group(2)) for m in _Q_RE.finditer(text)]
    answers: dict[str, str] = {}
    for i, (_s, e, n) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else len(text)
        body = " ".join(text[e:end].split()).strip(" *")
        # small models often echo the question before answering: keep only the answer
        if "?" in body[:160]:
            head, _, rest = body.partition("?")
            if rest.strip() and len(head.split()) >= 3:
                body = re.sub(r"^\s*(a(nswer)?\s*[:.)-])\s*", "", rest.strip(), flags=re.I)
        key = f"Q{n}"
        if body and key not in answers:
            answers[key] = body
    problems = [f"no answer for {q}" for q in QUESTIONS if q not in answers]
    if not answers and text.strip():
        answers["Q4"] = " ".join(text.split())[:600]  # keep the prose: grounding still gets a plan
        problems.append("no Q labels found; the whole reply is used as the plan")
    return answers, problems


_BULLET = re.compile(r"^\s*(?:[-*•>]+|\d+\s*[.):]|step\s*\d+\s*[:.)]|command\s*\d*\s*[:.)])\s*", re.I)


# a heading or remark around the commands ("Commands:", "Here are ...", "Note: ...", "Plan -"): the keyword must be
# a whole word followed by punctuation or the end, so "Plant the seed" and "notebook" stay commands
_PREAMBLE = re.compile(r"^(?:commands?|here (?:are|is)|note|notes|plan)\b\s*(?:[:\-.]|$)|^```", re.I)


def parse_actions(text: str, limit: int = 5) -> tuple[list[str], list[str]]:
    """Commands from a reply: one per line; bullets, numbering, quotes and code fences removed."""
    actions: list[str] = []
    problems: list[str] = []
    for raw in text.replace(";", "\n").splitlines():
        line = raw.strip().strip("`").strip()
        if not line or _PREAMBLE.match(line):
            continue
        line = _BULLET.sub("", line)
        line = re.sub(r"\s*\(.*?\)\s*$", "", line)  # trailing comments "(to get water)"
        # case, an "Action 3:" label and a "--> expected observation" tail are kept: Gate-1 repairs and
        # records them (SRM), map_action strips them (Baseline)
        line = line.strip(" .,:\"'*`")
        line = " ".join(line.split())
        if not line:
            continue
        if len(line.split("-->")[0].split()) > 12:
            problems.append(f"not a command (too long): {line[:80]!r}")
            continue
        actions.append(line)
        if len(actions) >= limit:
            break
    if not actions:
        problems.append("no commands found in the reply")
    return actions, problems


# ------------------------------------------------------------------ mapping onto valid actions

def map_action(raw: str, valid: Sequence[str], threshold: float, embedder=None, context: str = "") -> ActionMapping:
    """raw -> a valid action: exact (case and spacing aside), then the same normal form (agent_core.actions),
    then the nearest valid action *with the same verb* that names every object the raw action names, by
    embedding similarity above a threshold.

    A mapping never changes the command: `pick up axe` may not become `use axe on axe`, and a `focus on`
    is only ever mapped onto a `focus on` of the same object (a wrong focus ends the task). `context` (the
    room and inventory text) lets a mapping drop a material the game leaves out of its action names."""
    text, _kinds = strip_decorations(raw)
    by_key = {action_key(v): v for v in valid}
    if action_key(text) in by_key:
        return ActionMapping(raw=raw, mapped=by_key[action_key(text)], method="exact", similarity=1.0)
    norm = normalize(text)
    by_norm: dict[str, str] = {}
    for v in valid:
        by_norm.setdefault(normalize(v), v)
    verb = verb_of(text)
    arg = argument_of(text)
    candidates = [norm] + [f"{m} {arg}" for m in sorted(MOVE_VERBS) if verb in MOVE_VERBS]  # go to ~ teleport to
    for c in candidates:
        if c in by_norm:
            return ActionMapping(raw=raw, mapped=by_norm[c], method="normalized", similarity=1.0)
    if not verb:
        return ActionMapping(raw=raw, mapped=None, method="unmapped", reason="no known command verb")
    if verb == "focus on":
        return ActionMapping(raw=raw, mapped=None, method="unmapped",
                             reason="'focus on' is only mapped onto the same object")
    same = [v for v in valid if same_verb_class(verb_of(v), verb) and not self_referential(v)
            and names_everything(text, v, context)]
    if not same:
        return ActionMapping(raw=raw, mapped=None, method="unmapped",
                             reason=f"no valid action with the verb {verb!r} names all of its objects")
    if embedder is None:
        return ActionMapping(raw=raw, mapped=None, method="unmapped", reason="no embedder for similarity")
    vecs = embedder.encode(list(same))
    q = embedder.encode([canonical(text)])[0]
    sims = vecs @ q
    best = int(sims.argmax())
    sim = float(sims[best])
    if sim >= threshold:
        return ActionMapping(raw=raw, mapped=same[best], method="similarity", similarity=round(sim, 4))
    return ActionMapping(raw=raw, mapped=None, method="unmapped", similarity=round(sim, 4),
                         reason=f"the most similar {verb!r} action is below {threshold}")


# ------------------------------------------------------------------ the planner

@dataclass
class SageResult:
    plan: dict[str, str]
    actions: list[str]  # raw grounded actions (the buffer, before mapping)
    llm_calls: list[LLMCall] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    error: str | None = None  # an LLM failure: the controller falls back to Swift
    seconds: float = 0.0
    options: list[str] = field(default_factory=list)  # the numbered list offered (numbered grounding)
    picked_how: list[str] = field(default_factory=list)  # per action: number | echo | free | score (choices.py)
    scores: list[tuple[str, float]] = field(default_factory=list)  # sage.pick = score: every option, best first
    score_rule: str = "mean"  # how `scores` were made (sage.pick_rule): mean | pmi
    # pmi: each option's summed log-probability as the reply here, and as the reply to a prompt without the state
    score_parts: dict[str, tuple[float, float]] = field(default_factory=dict)
    deferred: str = ""  # sage.accept: why the scored pick was not played (Swift's action stands), in words


@dataclass
class SageContext:
    task: str
    look: str
    inventory: str
    score: float
    time: int
    history: list[tuple[str, str]]  # (action, observation), oldest first
    task_name: str = ""
    memory: str = ""  # AMM's T4 block (header + records, hints only), inserted verbatim; empty when AMM is off
    called_because: str = ""  # which switching rule fired and what Swift proposed ("my instinct tells me ...")
    worked_examples: list[tuple[str, list[str]]] = field(default_factory=list)  # (task description, actions)
    valid: list[str] = field(default_factory=list)  # the valid actions now (numbered grounding offers some)
    swift_ranked: list[str] = field(default_factory=list)  # Swift's best valid actions, best first
    focus: list[str] = field(default_factory=list)  # focus targets under review, most likely first


def _clip(s: str, n: int) -> str:
    s = " ".join((s or "").split())
    return s if len(s) <= n else s[: n - 3] + "..."


def history_start(n: int, k: int, anchor: int) -> int:
    """The first of `n` past steps shown: the last k (anchor 0), or from a start that moves in jumps of `anchor`
    steps, so between k and k + anchor - 1 steps are shown and consecutive prompts share them as a prefix (the model
    reads only what is new)."""
    if anchor <= 0:
        return max(0, n - k)
    return max(0, ((n - k) // anchor) * anchor) if n > k else 0


def _history(ctx: SageContext, k: int, clip: int = 160, anchor: int = 0) -> str:
    rows = [f"- {a} --> {_clip(o, clip)}" for a, o in ctx.history[history_start(len(ctx.history), k, anchor):]]
    return "\n".join(rows) or "(none yet)"


NONE_YET = "none of them yet"
_NONE_YET = re.compile(r"^[\s*`#>]*(?:option\s*)?0(?!\d)", re.I)
FOCUS_NOTE = ("A 'focus on' ends the task at once when it names the wrong object: pick one only if it is "
              "exactly what the task asks for.")


class Sage:
    def __init__(self, llm: LLMBackend, cfg: SageConfig | None = None, embedder=None):
        self.llm = llm
        self.cfg = cfg or SageConfig()
        self.embedder = embedder  # ranks valid actions by similarity to the plan (numbered grounding)
        if self.cfg.grounding not in ("numbered", "free"):
            raise ValueError(f"sage.grounding={self.cfg.grounding!r}: use 'numbered' or 'free'")
        if self.cfg.choose_reply not in ("command", "number"):
            raise ValueError(f"sage.choose_reply={self.cfg.choose_reply!r}: use 'command' or 'number'")
        self.context_template = load_prompt("context")
        self.plan_template = load_prompt("plan")
        self.choose_template = load_prompt("choose")
        self.choose_turn_template = load_prompt("choose_turn")
        self.ground_template = load_prompt("ground")
        self.example_template = load_prompt("example")
        self.focus_template = load_prompt("focus")
        self.choose_score_template = load_prompt("choose_score_turn")
        self.focus_score_template = load_prompt("focus_score")
        self.alone_template = load_prompt("alone").strip()
        self._alone_cache: dict[str, float] = {}
        self._parts: dict[str, tuple[float, float]] = {}

    def _call(self, purpose: str, prompt: str | list[Message], max_tokens: int,
              stop: list[str] | None = None) -> LLMCall:
        shown = prompt if isinstance(prompt, str) else prompt_text(prompt)
        call = LLMCall(purpose=purpose, backend=self.llm.name, model=self.llm.model or "", prompt=shown)
        try:
            r = self.llm.chat(prompt, max_tokens=max_tokens, temperature=self.cfg.temperature, stop=stop)
            call.output, call.prompt_tokens, call.completion_tokens = r.text, r.prompt_tokens, r.completion_tokens
            call.latency_s, call.model = r.latency_s, r.model
            call.cpu_threads = int(r.extra.get("threads", 0) or 0)
            call.cached_tokens = int(r.extra.get("cached_tokens", 0) or 0)
            call.cache_state = r.extra.get("cache_state", "")
        except Exception as e:  # noqa: BLE001 - an LLMError, or e.g. a RuntimeError inside llama.cpp: recorded, Swift acts
            call.error, call.error_kind = failure_of(e, self.llm.name)
        return call

    def _score(self, purpose: str, prompt: str | list[Message], options: Sequence[str],
               ) -> tuple[LLMCall, list[tuple[str, float]] | None]:
        """Every option's score as the model's reply to `prompt` (`sage.pick_rule`: the mean log-probability per token,
        or, for the pick after a plan, pmi), best first (ties by the
        option's text, so the order they came in never matters). None: the backend cannot score (the caller
        generates instead); an LLM failure is in the call's `error`."""
        shown = prompt if isinstance(prompt, str) else prompt_text(prompt)
        call = LLMCall(purpose=purpose, backend=self.llm.name, model=self.llm.model or "", prompt=shown)
        try:
            r = self.llm.score(prompt, list(options))
        except ScoringUnsupported:
            return call, None
        except Exception as e:  # noqa: BLE001 - an LLMError, or e.g. a RuntimeError inside llama.cpp: recorded, Swift acts
            call.error, call.error_kind = failure_of(e, self.llm.name)
            return call, []
        values = r.mean
        self._parts = {}
        if self.cfg.pick_rule == "pmi" and purpose == "ground":  # the focus review compares like with like
            try:
                alone = self._alone(options)
            except Exception as e:  # noqa: BLE001 - as above
                message, call.error_kind = failure_of(e, self.llm.name)
                call.error = f"scoring the options alone: {message}"
                return call, []
            values = [lp - a for lp, a in zip(r.logprobs, alone)]
            self._parts = {o: (round(lp, 4), round(a, 4)) for o, lp, a in zip(options, r.logprobs, alone)}
        ranked = sorted(zip(options, values), key=lambda os: (-os[1], action_key(os[0])))
        call.output = ranked[0][0] if ranked else ""
        call.prompt_tokens, call.completion_tokens, call.latency_s = r.prompt_tokens, r.scored_tokens, r.latency_s
        call.cached_tokens, call.cache_state = r.cached_tokens, r.cache_state
        call.cpu_threads = int(getattr(self.llm, "last_threads", 0) or 0)
        return call, [(o, round(s, 4)) for o, s in ranked]

    def _alone(self, options: Sequence[str]) -> list[float]:
        """Each option's summed log-probability as the reply to prompts/alone.txt (no task, no state, no plan): how
        likely its words are in themselves. Kept per option text for this Sage's life (the same prompt every time:
        `go to hallway` is scored once, not at every call)."""
        todo = [o for o in dict.fromkeys(options) if o not in self._alone_cache]
        if todo:
            self._alone_cache.update(zip(todo, self.llm.score_alone(self.alone_template, todo)))
        return [self._alone_cache[o] for o in options]

    def _take_scores(self, res: SageResult, call: LLMCall, ranked: list[tuple[str, float]], t0: float) -> SageResult:
        """A scoring call's outcome into the result: its error, or every score and the best option as the pick."""
        res.llm_calls.append(call)
        if call.error:
            res.error = call.error
        else:
            res.score_rule = "pmi" if self._parts else "mean"
            res.score_parts = dict(self._parts)
            res.scores = ranked
            res.actions, res.picked_how = [ranked[0][0]], ["score"]
        res.seconds = time.perf_counter() - t0
        return res

    def score_messages(self, ctx: SageContext, plan_reply: str, options: Sequence[str]) -> list[Message]:
        """The pick by meaning: the plan's conversation, then the options in alphabetical order (a fixed order:
        the same options give the same prompt however they were ranked)."""
        note = FOCUS_NOTE if any(is_focus(o) for o in options) else ""
        turn = self.choose_score_template.format(options=format_choices(sorted(options, key=action_key),
                                                                        numbered=False), focus_note=note)
        return [{"role": "user", "content": self.plan_prompt(ctx)}, {"role": "assistant", "content": plan_reply},
                {"role": "user", "content": turn.strip() + "\n"}]

    def _examples(self, ctx: SageContext) -> str:
        return "\n".join(self.example_template.format(task=_clip(d, 300), actions="; ".join(a[:25]))
                         for d, a in ctx.worked_examples[: self.cfg.worked_examples])

    def context(self, ctx: SageContext) -> str:
        """The part every Sage prompt starts with: fixed text first, what changes each step last (cache-friendly)."""
        memory = f"{ctx.memory}\n" if ctx.memory else ""  # AMM's block, with its own "hints only" header
        examples = self._examples(ctx)
        return self.context_template.format(
            examples=f"\n{examples}\n" if examples else "", task=ctx.task, look=_clip(ctx.look, self.cfg.look_chars),
            inventory=_clip(ctx.inventory, 200), score=int(ctx.score), time=ctx.time,
            history=_history(ctx, self.cfg.grounding_history_k, self.cfg.history_obs_chars, self.cfg.history_anchor),
            memory=memory,
            called_because=(ctx.called_because + "\n") if ctx.called_because else "").rstrip("\n") + "\n"

    def plan_prompt(self, ctx: SageContext) -> str:
        return self.plan_template.format(context=self.context(ctx))

    def options(self, ctx: SageContext, plan: dict[str, str]) -> list[str]:
        """The numbered list for this call (choices.py): Swift's ranking, the focus targets under review, then
        the valid actions most similar to the plan's subgoals."""
        query = " ".join(plan.get(q, "") for q in ("Q3", "Q4", "Q5")) or " ".join(plan.values())
        return build_choices(ctx.valid, query, ctx.swift_ranked, ctx.focus, self.embedder, self.cfg.choices,
                             self.cfg.swift_choices)

    def choose_prompt(self, ctx: SageContext, plan: dict[str, str], options: Sequence[str]) -> str:
        plan_text = "\n".join(f"{q}: {plan[q]}" for q in QUESTIONS if q in plan) or "(no plan)"
        note = FOCUS_NOTE if any(is_focus(o) for o in options) else ""
        return self.choose_template.format(context=self.context(ctx), plan=plan_text, options=format_choices(options),
                                           focus_note=note, more=self._more())

    def choose_messages(self, ctx: SageContext, plan_reply: str, options: Sequence[str]) -> list[Message]:
        """The numbered pick as the next turn of the plan's own conversation (`sage.choose_turn`): the model
        reads only the list, since the context and its own plan are the conversation so far (llama.cpp keeps
        them in its cache, a vLLM server in its prefix cache)."""
        note = FOCUS_NOTE if any(is_focus(o) for o in options) else ""
        by_number = self.cfg.choose_reply == "number"
        reply = (f"Reply with its number only{self._more()}." if by_number else
                 "Reply with that command only, copied exactly from the list" + (
                     "" if self.cfg.max_picks <= 1 else f" (or up to {self.cfg.max_picks} commands, one per line, "
                                                        f"when several in a row are clearly needed)") + ".")
        turn = self.choose_turn_template.format(options=format_choices(options, numbered=by_number), focus_note=note,
                                                reply=reply)
        return [{"role": "user", "content": self.plan_prompt(ctx)}, {"role": "assistant", "content": plan_reply},
                {"role": "user", "content": turn.strip() + "\n"}]

    def _more(self) -> str:
        return ("" if self.cfg.max_picks <= 1 else f" (or up to {self.cfg.max_picks} numbers in order, when several "
                                                   f"commands in a row are clearly needed)")

    def ground_prompt(self, ctx: SageContext, plan: dict[str, str]) -> str:
        plan_text = "\n".join(f"{q}: {plan[q]}" for q in QUESTIONS if q in plan) or "(no plan)"
        return self.ground_template.format(examples=self._examples(ctx), task=ctx.task,
                                           look=_clip(ctx.look, self.cfg.look_chars),
                                           inventory=_clip(ctx.inventory, 200),
                                           history=_history(ctx, self.cfg.grounding_history_k), plan=plan_text)

    def focus_prompt(self, ctx: SageContext, options: Sequence[str]) -> str:
        return self.focus_template.format(task=ctx.task, look=_clip(ctx.look, self.cfg.look_chars),
                                          inventory=_clip(ctx.inventory, 200),
                                          history=_history(ctx, self.cfg.grounding_history_k, self.cfg.history_obs_chars),
                                          options=format_choices(options))

    def review_focus(self, ctx: SageContext) -> SageResult:
        """A `focus on` Swift is unsure of: one short call that compares the focus targets in view (most likely
        first) and answers with a number, or "none of them yet" (`actions` empty, `picked_how` ["none"]).
        No Q1-Q5 plan: the question is narrower than a plan, and the call takes a few seconds."""
        t0 = time.perf_counter()
        # the targets the task names are always offered (Swift's summed log-probability ranks long names low)
        focus = list(dict.fromkeys(ctx.focus))
        named = [a for a in focus if task_names(a, ctx.task)]
        options = list(dict.fromkeys(named + focus))[: max(self.cfg.choices, len(named))]
        res = SageResult(plan={}, actions=[], options=options)
        if self.cfg.pick == "score":
            prompt = self.focus_score_template.format(
                task=ctx.task, look=_clip(ctx.look, self.cfg.look_chars), inventory=_clip(ctx.inventory, 200),
                history=_history(ctx, self.cfg.grounding_history_k, self.cfg.history_obs_chars),
                options=format_choices(sorted(options, key=action_key), numbered=False))
            call, ranked = self._score("focus_review", prompt, options + [NONE_YET])
            if ranked is not None:
                self._take_scores(res, call, ranked, t0)
                if res.actions == [NONE_YET]:
                    res.actions, res.picked_how = [], ["none"]
                return res
            res.problems.append("focus review: this backend cannot score options; the model wrote its answer")
        call = self._call("focus_review", self.focus_prompt(ctx, options), self.cfg.choose_max_tokens)
        res.llm_calls.append(call)
        if call.error:
            res.error = call.error
        else:
            if _NONE_YET.match(call.output):  # "0", "0.", "**0**", "0. none of them yet"
                res.picked_how = ["none"]
            else:
                picks, how, problems = parse_choices(call.output, options, 1)
                res.actions = [a for a, h in zip(picks, how) if a in options]
                res.picked_how = [h for a, h in zip(picks, how) if a in options]
                res.problems += [f"focus review: {p}" for p in problems]
                if picks and not res.actions:
                    res.problems.append(f"focus review: {picks[0]!r} is not one of the focus targets offered")
        res.seconds = time.perf_counter() - t0
        return res

    def _accept(self, res: SageResult, ctx: SageContext) -> SageResult:
        """`sage.accept`: whether the scored pick replaces Swift's action, or Sage defers (no action: Swift's
        stands). The scores stay in the result either way."""
        rule = self.cfg.accept
        if rule == "best" or res.error or not res.scores or not res.actions:
            return res
        best, first = res.scores[0]
        if rule == "margin":
            gap = first - res.scores[1][1] if len(res.scores) > 1 else math.inf
            if gap >= self.cfg.accept_margin:
                return res
            why = (f"Sage's best-scored option '{best}' beat the runner-up '{res.scores[1][0]}' by only {gap:.2f} "
                   f"(sage.accept_margin {self.cfg.accept_margin:g})")
        else:
            top = [action_key(a) for a in list(ctx.swift_ranked)[: self.cfg.accept_top_k]]
            if action_key(best) in top:
                return res
            why = (f"Swift does not rank Sage's best-scored option '{best}' among its first {self.cfg.accept_top_k} "
                   f"valid actions (sage.accept = agree)")
        res.actions, res.picked_how, res.deferred = [], [], why
        return res

    def think(self, ctx: SageContext) -> SageResult:
        """Plan, then ground. Any LLM failure is recorded and returned, never raised."""
        t0 = time.perf_counter()
        res = SageResult(plan={}, actions=[])
        plan_call = self._call("plan", self.plan_prompt(ctx), self.cfg.plan_max_tokens)
        res.llm_calls.append(plan_call)
        if plan_call.error:
            res.error = plan_call.error
            res.seconds = time.perf_counter() - t0
            return res
        res.plan, problems = parse_plan(plan_call.output)
        res.problems += [f"plan: {p}" for p in problems]
        if self.cfg.grounding == "numbered" and ctx.valid and self.cfg.pick == "score":
            res.options = self.options(ctx, res.plan)
            if res.options:
                call, ranked = self._score("ground", self.score_messages(ctx, plan_call.output, res.options),
                                           res.options)
                if ranked is not None:
                    return self._accept(self._take_scores(res, call, ranked, t0), ctx)
                res.problems.append("grounding: this backend cannot score options; the model wrote its pick")
        if self.cfg.grounding == "numbered" and ctx.valid:
            res.options = res.options or self.options(ctx, res.plan)
            prompt = (self.choose_messages(ctx, plan_call.output, res.options) if self.cfg.choose_turn
                      else self.choose_prompt(ctx, res.plan, res.options))
            ground_call = self._call("ground", prompt, self.cfg.choose_max_tokens)
        else:
            ground_call = self._call("ground", self.ground_prompt(ctx, res.plan), self.cfg.ground_max_tokens)
        res.llm_calls.append(ground_call)
        if ground_call.error:
            res.error = ground_call.error
        elif res.options:
            res.actions, res.picked_how, problems = parse_choices(ground_call.output, res.options, self.cfg.max_picks)
            res.problems += [f"grounding: {p}" for p in problems]
        else:
            res.actions, problems = parse_actions(ground_call.output)
            res.problems += [f"grounding: {p}" for p in problems]
        res.seconds = time.perf_counter() - t0
        return res


__all__ = ["Sage", "SageContext", "SageResult", "build_choices", "map_action", "normalize", "parse_actions",
           "parse_choices", "parse_plan", "QUESTIONS"]
