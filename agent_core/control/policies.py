"""Swift behind the controller's interface: the trained model (`ModelSwift`), a scripted stand-in for tests and
demos (`ScriptedSwift`), and the rules that read a proposal (the invalid trigger, deferring an unsure focus)."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Protocol, Sequence

from ..actions import action_key, argument_of, canonical, is_focus
from ..config import Config
from ..task_focus import unnamed_focus_actions
from ..srm.loop_guard import STREAK, apply_loop_guard
from ..swift.format import SwiftState, swift_input
from ..swift.model import SwiftProposal

ROOT = Path(__file__).resolve().parents[2]


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
    applied by the controller when SRM is on and Sage off; `loop_guard=True` here is for the Swift-only benchmark."""

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
        # a fixed list is one proposal per step: a second ranking in the same step (SRM's rerank at a dead end)
        # would take the next step's item
        self.reranks = self._fn is not None

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
    from ..swift.model import SwiftModel, default_threads

    sc = cfg.swift
    # the config's limit, and an evaluation worker's share of the cores (SWIFT_THREADS) when it sets one
    limits = [n for n in (sc.threads, default_threads()) if n > 0]
    model = SwiftModel(ROOT / sc.checkpoint_dir / "model", threads=min(limits) if limits else 0,
                       max_input_tokens=sc.max_input_tokens, max_output_tokens=sc.max_output_tokens,
                       quantize=sc.quantize, unconstrained_beams=sc.unconstrained_beams)
    return ModelSwift(model, sc.history_k, sc.num_candidates, focus_margin=sc.focus_margin,
                      defer_unsure_focus=sc.defer_unsure_focus and not cfg.controller.sage_enabled,
                      task_focus_check=sc.task_focus_check)
