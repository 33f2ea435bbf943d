"""When control passes between Swift and Sage: the switching triggers (invalid, critical, unexpected, stuck)
and SwiftSage's streak rule that makes Swift act after too many Sage calls in a row."""
from __future__ import annotations

from typing import Sequence

from ..actions import action_key
from ..decisions import SwiftForced
from ..swift.model import SwiftProposal
from ..trace import Trigger
from .policies import invalid_fires
from .draft import StepDraft


class Switching:
    """Part of `agent_core.controller.Agent` (a mixin: it reads the agent's attributes)."""

    def _triggers(self, prop: SwiftProposal, action: str, valid: Sequence[str]) -> list[Trigger]:
        cc = self.cfg.controller
        out: list[Trigger] = []
        valid_keys = {action_key(v) for v in valid}
        if invalid_fires(prop, valid_keys, cc):
            out.append(Trigger("invalid", "invalid: Swift's action is not valid in the current state" + (
                "" if cc.invalid_rule == "top1" else
                f" (no valid action scores above {cc.invalid_min_score:g} per token)"),
                               {"swift_top1": prop.top1, "rule": cc.invalid_rule}))
        if cc.critical_review == "off":  # Swift's focus acts; no focus goes to Sage
            critical = False
        elif cc.critical_review == "always":  # SwiftSage: the action or Swift's unconstrained guess is a focus
            critical = action.startswith(cc.critical_prefixes) or prop.top1.lower().startswith(cc.critical_prefixes)
        else:  # "unsure": the action to be taken is a focus, and Swift is not sure of its object
            sure = (prop.focus_margin is not None and prop.focus_margin >= self.cfg.swift.focus_margin
                    and action == prop.action)
            critical = action.startswith(cc.critical_prefixes) and not sure
        if critical:
            out.append(Trigger("critical", "critical: 'focus on ...' is a key decision that can end the task" + (
                f" (Swift's margin among the focus targets {prop.focus_margin:.2f} < {self.cfg.swift.focus_margin:.2f})"
                if prop.focus_margin is not None else ""), {"swift_action": action, "focus_margin": prop.focus_margin}))
        last_text = (self.last.text if self.last else "").lower()
        hits = [m for m in cc.unexpected_markers if m in last_text]
        if self.records and hits:
            out.append(Trigger("unexpected", "unexpected: the last observation reports a failure or anomaly",
                               {"markers": hits, "observation": self.last.text[:300]}))
        w = cc.stuck_window
        recent = self.state.rewards[-w:]
        if self.state.steps_since_sage >= w and len(recent) == w and sum(recent) == 0:
            out.append(Trigger("stuck", f"stuck: the rewards of the last {w} steps sum to 0", {"rewards": recent}))
        return out

    def _swift_forced(self, w: StepDraft, fired: Sequence[Trigger]) -> bool:
        """SwiftSage's rule: after `sage_streak_limit` Sage calls in a row, Swift acts once whatever fired. The
        step records it as the switch `swift_forced`, with the triggers that were set aside."""
        limit = self.cfg.controller.sage_streak_limit
        if limit <= 0 or self.state.sage_streak < limit:
            return False
        again = w.trigger is not None and w.trigger.name == "swift_forced"  # already forced earlier in this step
        names = list(w.trigger.evidence["set_aside"]) if again else []
        rules = list(w.trigger.evidence["set_aside_rules"]) if again else []
        for f in fired:
            if f.name not in names:
                names.append(f.name)
                rules.append(f.rule)
        w.trigger = Trigger("swift_forced", f"back to Swift: Sage was called {self.state.sage_streak} times in a row "
                                            f"(at {limit} Swift acts once; `controller.sage_streak_limit`), so "
                                            f"{', '.join(names)} did not call Sage this step",
                            {"set_aside": names, "sage_calls_in_a_row": self.state.sage_streak,
                             "set_aside_rules": rules})
        if again:
            return True
        w.emit(SwiftForced(sage_calls=self.state.sage_streak, set_aside=list(names)))
        return True
