"""What the agent knows between two steps (`AgentState`), and the digest of it that every step record carries.

The state is never changed in place between steps: `agent_core.episode.reducer.apply` turns the state before a step
and the step's record into the state after it, for the live step and every replay alike. Within a step the
controller works on a copy (`draft()`), so a step that fails half way leaves the committed state untouched.
"""
from __future__ import annotations

import copy
from collections import deque
from dataclasses import dataclass, field, fields

from ..swift.format import SwiftState
from ..trace import AfterStep, MemoryRetrieval, StagnationReport


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
    room: str = ""  # where the agent is now (a memory record names the room its step started in)
    # SRM
    focus_done: int = 0
    # of focus_done, those the game took without a reward (Gate-1's FOCUS_LIMIT under focus_limit_counts =
    # "rewarded"); not in the digest: the record's own action and reward give it, so a replay cannot differ
    focus_unrewarded: int = 0
    # the objects the counted focuses named (`focus on X` -> X; a menu's request when a menu answer chose it):
    # Gate-1's FOCUS_REPEAT; not in the digest either, for the same reason
    focused: list[str] = field(default_factory=list)
    focus_rejected: int = 0  # `focus on` actions the game rejected: not taken (traces before 2026-12-04 counted them)
    last_report_step: int | None = None
    pending_report: StagnationReport | None = None
    pending_report_step: int = 0
    avoid: list[str] = field(default_factory=list)
    avoid_until: int = 0
    critic_calls: int = 0
    last_critic_step: int | None = None
    critic_backoff_until: int = 0
    menu_tried: dict[str, list[int]] = field(default_factory=dict)  # a menu's options -> the numbers sent
    # AMM: this episode's caches (the store itself is outside the state; see agent_core.amm.rewind)
    amm_t2: MemoryRetrieval | None = None  # the latest T2 / T3 retrievals: the Critic's evidence (Full)
    amm_t3: MemoryRetrieval | None = None
    amm_t3_fired: list[str] = field(default_factory=list)  # action keys T3 already fired for
    amm_written: dict[str, str] = field(default_factory=dict)  # content key -> id of this episode's record

    def draft(self) -> "AgentState":
        """A working copy for one step: the step's decisions may change it, the committed state stays."""
        out = copy.copy(self)
        out.buffer = deque(copy.copy(b) for b in self.buffer)
        out.rewards, out.sage_history, out.avoid = list(self.rewards), list(self.sage_history), list(self.avoid)
        out.focused = list(self.focused)
        out.plan, out.amm_written, out.amm_t3_fired = dict(self.plan), dict(self.amm_written), list(self.amm_t3_fired)
        out.menu_tried = {k: list(v) for k, v in self.menu_tried.items()}
        if self.swift_state is not None:
            out.swift_state = copy.copy(self.swift_state)
            out.swift_state.history = list(self.swift_state.history)
        return out


def initial_state(task: str, task_description: str, score: float, look: str, inventory: str,
                  room: str) -> AgentState:
    return AgentState(room=room, swift_state=SwiftState(task_description=task_description, score=score, look=look,
                                                        inventory=inventory, start_room=room, task=task))


def digest(st: AgentState) -> AfterStep:
    """The part of the state that decides what the agent does next and is not read back from the environment:
    every record carries it, and a replay that rebuilds a different one stops (ReplayError)."""
    return AfterStep(mode=st.mode, buffer=[b.text for b in st.buffer], buffer_sources=[b.source for b in st.buffer],
                     buffer_failures=st.buffer_failures, steps_since_sage=st.steps_since_sage,
                     sage_streak=st.sage_streak, focus_done=st.focus_done,
                     pending_report_step=st.pending_report_step if st.pending_report is not None else None,
                     last_report_step=st.last_report_step, avoid=list(st.avoid), avoid_until=st.avoid_until,
                     critic_calls=st.critic_calls, last_critic_step=st.last_critic_step,
                     critic_backoff_until=st.critic_backoff_until,
                     menu_tried={k: list(v) for k, v in sorted(st.menu_tried.items())},
                     memory_written=len(st.amm_written), t3_fired=sorted(st.amm_t3_fired))


def differences(a: AfterStep, b: AfterStep, only: tuple[str, ...] | None = None) -> list[str]:
    """The fields where two digests differ, each as 'field: a != b'."""
    out = []
    for f in fields(AfterStep):
        if only is not None and f.name not in only:
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x != y:
            out.append(f"{f.name}: {x!r} != {y!r}")
    return out
