"""The SwiftSage input format (docs/AGENT.md §2): the one place that turns an episode's history
into Swift's input string. Training data, inference and the app all call `swift_input`.

    Task: D; Time: t-1; Score: S_{t-1}; Action history: [A_{t-i} (+R_{t-i}) --> O_{t-i} | i from K to 1];
    Current room: E_{t-1}; Inventory: I_{t-1}; Visited rooms: {E*_1, ..., E*_{t-1}}
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_WS = re.compile(r"\s+")
NOOP_OBSERVATION = re.compile(r"^The [\w ]+ is already open\.?$")
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


def is_noop(action: str, observation: str) -> bool:
    """A step that changes nothing Swift's input does not already show: `look around` (the current room is
    in the input) and opening what "is already open" (every gold path does it for doors under openDoors).
    Such steps are not part of Swift's history, in training (swift/data.py) and in the agent alike."""
    return action.strip() == "look around" or bool(NOOP_OBSERVATION.match((observation or "").strip()))


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
    task: str = ""  # the task's name (not part of the model's input): what agent_core.task_focus checks against

    @property
    def time(self) -> int:
        """Swift's `Time`: the steps in its history (no-op steps are not counted, as in training)."""
        return len(self.history)

    def observe(self, action: str, observation: str, reward: float, room: str, score: float, look: str,
                inventory: str) -> bool:
        """The one way a step enters Swift's state (training pairs and the agent both call it): the room,
        inventory and score always update; the history grows unless the step was a no-op. True if added."""
        self.score, self.look, self.inventory = score, look, inventory
        if is_noop(action, observation):
            return False
        self.history.append(HistoryStep(action=action, observation=observation, reward=reward, room=room))
        return True

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
