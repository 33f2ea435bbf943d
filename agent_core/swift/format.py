"""The SwiftSage input format (SPEC.md section 2): the one place that turns an episode's history
into Swift's input string. Training data, inference and the app all call `swift_input`.

    Task: D; Time: t-1; Score: S_{t-1}; Action history: [A_{t-i} (+R_{t-i}) --> O_{t-i} | i from K to 1];
    Current room: E_{t-1}; Inventory: I_{t-1}; Visited rooms: {E*_1, ..., E*_{t-1}}
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_WS = re.compile(r"\s+")
# Long texts are clipped (deterministically) so the input fits the model; the current room keeps
# the most room because its visible objects are what the next action names.
OBS_MAX_CHARS = 100
ROOM_MAX_CHARS = 520
INV_MAX_CHARS = 160
DESC_MAX_CHARS = 320


def clean(text: str, limit: int | None = None) -> str:
    """One line, single spaces; clipped to `limit` characters with an ellipsis."""
    s = _WS.sub(" ", text or "").strip()
    if limit is not None and len(s) > limit:
        s = s[: limit - 3].rstrip() + "..."
    return s


def fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(round(float(x), 2))


def fmt_reward(r: float) -> str:
    return ("+" if r >= 0 else "") + fmt_num(r)


@dataclass
class HistoryStep:
    """What Swift sees of one past step."""

    action: str
    observation: str
    reward: float
    room: str  # the room name after the action (E*_t)


@dataclass
class SwiftState:
    """Everything the input needs at time t (before choosing A_t)."""

    task_description: str
    score: float  # S_{t-1}
    look: str  # E_{t-1}: the current room and what is visible in it
    inventory: str  # I_{t-1}
    history: list[HistoryStep] = field(default_factory=list)  # all steps so far, oldest first
    start_room: str = ""  # room name at t=0 (the first visited room)

    @property
    def time(self) -> int:
        return len(self.history)

    def visited_rooms(self) -> list[str]:
        seen: list[str] = []
        for r in [self.start_room] + [h.room for h in self.history]:
            if r and r not in seen:
                seen.append(r)
        return seen


def swift_input(state: SwiftState, k: int = 10) -> str:
    hist = state.history[-k:] if k > 0 else []
    items = " | ".join(f"{clean(h.action)} ({fmt_reward(h.reward)}) --> {clean(h.observation, OBS_MAX_CHARS)}"
                       for h in hist)
    return (f"Task: {clean(state.task_description, DESC_MAX_CHARS)}; Time: {state.time}; "
            f"Score: {fmt_num(state.score)}; "
            f"Action history: [{items}]; Current room: {clean(state.look, ROOM_MAX_CHARS)}; "
            f"Inventory: {clean(state.inventory, INV_MAX_CHARS)}; "
            f"Visited rooms: {{{', '.join(state.visited_rooms())}}}")
