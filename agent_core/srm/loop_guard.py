"""Swift's loop guard: decoding that uses what the environment already told us. It is stagnation control,
so it belongs to SRM and runs only when SRM is on (`srm.loop_guard`); Baseline takes Swift's best action.

A small behaviour-cloned model falls into two loops that the environment makes obvious: bouncing between
two rooms (`go to kitchen`, `go to hallway`, `go to kitchen`, ...) and repeating one action that keeps
returning the same observation without reward. When Swift's best valid action would continue such a
loop, the guard takes the next-ranked valid action instead and says why.

The rules are narrow on purpose: on all 2,481 committed gold trajectories (train + dev, 71,734 steps
after removing no-ops) they block no gold action (tests/test_loop_guard.py keeps it so), while a broader
"no repeat without reward" rule would block about half of all gold actions (waiting, reading a
thermometer and watching an inclined plane are legitimately repetitive), and a "no more than N
unrewarded moves in a row" rule would block gold searches of up to 12 rooms.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..actions import is_focus
from ..config import SRMConfig
from ..swift.format import HistoryStep
from ..swift.model import SwiftProposal

STREAK = SRMConfig().loop_guard_streak


def loop_reason(action: str, history: Sequence[HistoryStep], streak: int = STREAK) -> str | None:
    """Why taking `action` now would continue a loop, or None."""
    h = list(history)
    if (action.startswith("go to ") and len(h) >= 3 and action == h[-2].action and h[-1].action == h[-3].action
            and h[-1].action.startswith("go to ") and action != h[-1].action
            and all(s.reward == 0 for s in h[-3:])):
        return f"bouncing: '{action}' would repeat the room cycle '{h[-3].action}' / '{h[-2].action}'"
    if (len(h) >= streak and all(s.action == action and s.observation == h[-1].observation and s.reward == 0
                                 for s in h[-streak:])):
        return f"streak: '{action}' returned the same observation {streak} times without reward"
    return None


def apply_loop_guard(proposal: SwiftProposal, history: Sequence[HistoryStep], streak: int = STREAK) -> SwiftProposal:
    """The proposal with its action replaced by the best valid action that does not continue a loop."""
    reason = loop_reason(proposal.action, history, streak)
    if reason is None:
        return proposal
    for alt, _score in proposal.valid_ranked:
        # never a `focus on` in place of Swift's own choice: a wrong focus ends the task
        if alt != proposal.action and not is_focus(alt) and loop_reason(alt, history, streak) is None:
            return replace(proposal, action=alt, guard=f"{reason}; took '{alt}' instead")
    return replace(proposal, guard=f"{reason}; no other ranked valid action, kept it")
