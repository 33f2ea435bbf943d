"""The one transition function: the state before a step and the step's record give the state after it.

The live step commits through `apply` and every replay (resume, fork, export, the Run page's scrub) folds it over
the recorded steps, so a replayed episode knows exactly what the live one knew. `apply` reads only the record and
the config, never the environment or a model, and does not change its inputs.
"""
from __future__ import annotations

import re
from collections import deque
from typing import Iterable

from ..actions import action_key, argument_of, is_focus
from ..config import Config
from ..observation import parse_menu
from ..trace import StepRecord
from .state import AgentState, Buffered, digest

SAGE_CALL_PURPOSES = ("plan", "focus_review")  # one of these LLM calls in a step = Sage was called there
CRITIC_ASKED = ("called", "failed", "repeat_skipped")  # the Critic's LLM was asked: it counts against the budget
CRITIC_WAITING = "waiting"


def sage_called(rec: StepRecord) -> bool:
    return any(c.purpose in SAGE_CALL_PURPOSES for c in rec.llm_calls)


def sage_streak_after(streak: int, rec: StepRecord) -> int:
    """Sage calls in a row after this step: one more where Sage was called, back to 0 where Swift acted alone."""
    if sage_called(rec):
        return streak + 1
    return 0 if rec.system == "swift" else streak


def focus_counts(rec: StepRecord) -> bool:
    """A focus counts when it happened: not when it only raised a menu, but when the menu answer chose it; not when
    the game rejected it ("No known action matches that input": nothing was focused, and Gate-1's FOCUS_LIMIT
    would then drop the task's one real focus)."""
    if rec.menu is not None:
        return rec.menu.chosen >= 0 and is_focus(rec.menu.request) and rec.action_valid is not False
    options = rec.menu_options if rec.after is not None else parse_menu(rec.observation)  # schema 1: from the text
    return is_focus(rec.action) and not options and rec.action_valid is not False


def menu_key(options: Iterable[str]) -> str:
    return "|".join(sorted(options))


_T3_WHY = re.compile(r"the invalid action '(.*)' was repeated")


def apply(state: AgentState, rec: StepRecord, cfg: Config, room_before: str | None = None) -> AgentState:
    """The state after `rec`, given the state before it."""
    st = state.draft()
    srm = cfg.srm
    # the buffer and who acts next are the step's own decisions: the record holds their outcome
    if rec.after is not None:
        st.mode, st.buffer_failures = rec.after.mode, rec.after.buffer_failures
        st.buffer = deque(Buffered(a, s) for a, s in zip(rec.after.buffer, rec.after.buffer_sources))
    else:  # schema 1: only a non-empty buffer was recorded, and no failure count
        srcs = rec.buffer_after_sources or ["sage"] * len(rec.buffer_after)
        st.buffer = deque(Buffered(a, s) for a, s in zip(rec.buffer_after, srcs))
        st.mode, st.buffer_failures = ("sage" if rec.mode_after == "sage" and rec.buffer_after else "swift"), 0
    if focus_counts(rec):
        st.focus_done += 1
        st.focus_unrewarded += rec.reward <= 0
        st.focused.append(argument_of(rec.menu.request if rec.menu is not None else rec.action))
    elif rec.menu is None and is_focus(rec.action) and rec.action_valid is False:
        st.focus_rejected += 1
    st.rewards.append(rec.reward)
    st.steps_since_sage = 1 if sage_called(rec) else st.steps_since_sage + 1
    st.sage_streak = sage_streak_after(st.sage_streak, rec)
    st.swift_state.observe(rec.action, rec.observation, rec.reward, rec.room, rec.score, rec.look, rec.inventory)
    st.sage_history.append((rec.action, rec.observation))
    st.room = rec.room
    if rec.plan:
        st.plan = dict(rec.plan)
    # SRM: the ambiguity menus answered, the Critic's budget and back-off, the report and its avoid list
    if rec.menu is not None and rec.menu.chooser == "gate1" and rec.menu.chosen >= 0:
        st.menu_tried.setdefault(menu_key(rec.menu.options), []).append(rec.menu.chosen)
    c = rec.critic
    if c is not None and c.status != CRITIC_WAITING:
        st.pending_report = None
        if c.status in CRITIC_ASKED:
            st.critic_calls, st.last_critic_step = st.critic_calls + 1, rec.step
        if c.status == "repeat_skipped":
            st.critic_backoff_until = rec.step + srm.critic_repeat_backoff_steps
    if rec.reward > 0:
        st.avoid = []  # progress: the last report's list no longer binds
    if rec.stagnation is not None:
        st.last_report_step = st.pending_report_step = rec.step
        st.pending_report = rec.stagnation
        st.avoid, st.avoid_until = list(rec.stagnation.actions_to_avoid), rec.step + srm.gate1_avoid_steps
    # AMM: the episode's caches
    for r in rec.retrievals:
        if r.trigger == "T2":
            st.amm_t2 = r
        elif r.trigger == "T3":
            st.amm_t3 = r
            subject = r.subject
            if not subject:  # schema 1: the action is only named in the reason
                m = _T3_WHY.search(r.why)
                subject = action_key(m.group(1)) if m else ""
            if subject and subject not in st.amm_t3_fired:
                st.amm_t3_fired.append(subject)
    for w in rec.memories_written:
        if w.id and not w.error and not w.duplicate_of and w.type == "observation":
            key = w.content_key or _legacy_content_key(w.tag, rec, room_before if room_before is not None else state.room)
            st.amm_written.setdefault(key, w.id)
    return st


def _legacy_content_key(tag: str, rec: StepRecord, room: str) -> str:
    from ..amm.salience import content_key

    return content_key(tag, rec.menu.request if rec.menu else rec.action, rec.observation, room)


def fold(state: AgentState, steps: Iterable[StepRecord], cfg: Config) -> AgentState:
    for rec in steps:
        state = apply(state, rec, cfg)
    return state


def check(state: AgentState, rec: StepRecord) -> list[str]:
    """Where the rebuilt state differs from the one the record says the live run had ([] when it agrees, or when
    the record predates the digest)."""
    from .state import differences

    if rec.after is None:
        return []
    mine = digest(state)
    if rec.after.focus_done == mine.focus_done + state.focus_rejected:
        mine.focus_done = rec.after.focus_done  # recorded when a rejected focus still counted: the same run
    return differences(mine, rec.after)
