"""What one step of ScienceWorld returns, typed: the `Observation` record and the helpers that read the game's text
(its room name, its "not a valid action" replies, its ambiguity menu). `agent_core.env` re-exports every name.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

INVALID_ACTION_TEXT = "No known action matches that input."
_ROOM_RE = re.compile(r"This room is called the ([^.]+)\.")
# Observations that mean the action did nothing (not a crash): the agent must be told it was not valid.
_NOT_VALID_PREFIXES = (INVALID_ACTION_TEXT, "Unknown action.")
AMBIGUOUS_PREFIX = "Ambiguous request"
_MENU_ROW = re.compile(r"^\s*(\d+):\s*(.+?)\s*$")


def parse_menu(text: str) -> list[str]:
    """The options of ScienceWorld's ambiguity menu ("Ambiguous request: ... 0: look at yellow paint ..."),
    in number order; [] when the text is not such a menu."""
    if not (text or "").lstrip().startswith(AMBIGUOUS_PREFIX):
        return []
    rows = [m for m in (_MENU_ROW.match(line) for line in text.splitlines()) if m]
    return [m.group(2) for m in sorted(rows, key=lambda m: int(m.group(1)))]


@dataclass
class Observation:
    text: str  # what the environment said in reply to the action
    look: str  # current room and visible objects ("look around", free)
    inventory: str
    task_description: str
    score: float  # cumulative, 0-100; negative means failed
    reward: float  # score change of this step
    moves: int
    done: bool
    failed: bool  # score < 0
    room: str
    action: str = ""  # the action that produced this observation ("" for reset)
    action_valid: bool = True  # False when the parser matched nothing
    step: int = 0  # agent steps taken so far in this episode
    # ScienceWorld answered an ambiguous action with a numbered menu: its options (index = number to send)
    menu: list[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.score >= 100

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clean_desc(desc: str) -> str:
    return desc.replace("Task Description:", "", 1).strip()


def room_of(look: str) -> str:
    m = _ROOM_RE.search(look or "")
    return m.group(1).strip() if m else ""


def listing(look: str) -> list[str]:
    """A room text as an order-free list of what it names: its lines, and the items of a line's comma list (a
    container's contents are a set too: "On the table is: a glass cup, a wood cup")."""
    out: list[str] = []
    for line in look.strip().splitlines():
        head, sep, rest = line.strip().rstrip(".").rstrip().partition(": ")
        if sep:
            out.append(head + ":")
        out.extend(item.strip() for item in (rest if sep else head).split(", "))
    return sorted(out)


def same_lines_reordered(look: str, recorded: str) -> bool:
    """The same lines and items in another order (and so worth another load); False when equal or when the rooms
    differ."""
    return look.strip() != recorded.strip() and listing(look) == listing(recorded)
