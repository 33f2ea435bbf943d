"""Swift's turn: its proposal, the loop guard, AMM's T1 retry, Gate-1 on its candidates, and the hand-over
to Sage when a trigger fires."""
from __future__ import annotations

import time
from typing import Sequence

from ..actions import action_key, is_focus
from ..decisions import (AdmissibleRerank, DeferredFocus, FocusMargin, LoopGuard, NothingAdmissible, T1Retry,
                         UnsureFocusReplaced)
from ..srm.gate1 import DROP
from ..srm.loop_guard import apply_loop_guard
from ..swift.model import SwiftProposal
from ..trace import Trigger
from .draft import StepDraft, timed
from .policies import invalid_fires


class SwiftTurn:
    """Part of `agent_core.controller.Agent` (a mixin: it reads the agent's attributes)."""

    def _swift_turn(self, w: StepDraft, valid: Sequence[str]) -> tuple[str, str]:
        st, srm = self.state, self.cfg.srm
        t0 = time.perf_counter()
        prop = self.swift.propose(st.swift_state, valid)
        if self.parts.loop_guard_streak is not None:
            prop = apply_loop_guard(prop, st.swift_state.history, self.parts.loop_guard_streak)
        w.timings["swift"] = time.perf_counter() - t0
        if self.amm is not None and self._t1_fires(prop, valid):
            prop = self._t1(w, valid, prop)
        w.prop = prop
        if prop.focus_margin is not None:  # how sure Swift is of its focus decides who reviews it
            best, margin, thr = (prop.focus[0][0] if prop.focus else prop.action), round(prop.focus_margin, 4), \
                self.cfg.swift.focus_margin
            w.emit(FocusMargin(focus=best, margin=margin, threshold=thr))
            if prop.deferred:
                w.emit(DeferredFocus(focus=best, margin=margin, threshold=thr, instead=prop.action))
        if prop.guard:
            w.emit(LoopGuard(detail=prop.guard))
        swift_action: str | None = prop.action
        forced: Trigger | None = None
        ranked = [prop.action] + [a for a, _s in prop.valid_ranked if a != prop.action]
        gate = self.parts.gate
        if gate is not None:
            swift_action, dropped = None, []
            first_reason = ""
            for i, cand in enumerate(ranked[: srm.gate1_max_swift_tries]):
                # Swift's second choice after its first was a repeat focus: it did choose to focus, only on the object
                # already focused (once: a third-ranked focus stays a fallback)
                after_repeat = srm.gate1_focus_after_repeat and i == 1 and first_reason == "FOCUS_REPEAT"
                d = gate.check(cand, "swift", self._gate_ctx(valid, w.step), fallback=i > 0 and not after_repeat)
                first_reason = first_reason or d.reason
                w.gate1.append(d)
                if d.decision != DROP:
                    swift_action = d.result
                    break
                dropped.append(cand)
                w.drops += 1
                if len(dropped) >= srm.gate1_drops_for_sage:
                    break
            if swift_action is None:
                forced = Trigger("gate1_drops", f"Gate-1 dropped {len(dropped)} of Swift's actions in this step "
                                                f"(at {srm.gate1_drops_for_sage} drops Sage decides the step, once)",
                                 {"dropped": dropped})
        fired = self._triggers(prop, swift_action or prop.action, valid) if self.parts.sage else []
        if forced and self.parts.sage:
            fired.insert(0, forced)
        if fired and not w.sage_called and self._swift_forced(w, fired):
            if swift_action is not None and is_focus(swift_action) and any(f.name == "critical" for f in fired):
                # nobody reviews this unsure focus, and a wrong one ends the task: Swift's best other action
                alt = self._best_non_focus(prop, valid) or "look around"  # with none ranked: changes nothing
                w.emit(UnsureFocusReplaced(focus=swift_action, instead=alt))
                swift_action = alt
        elif fired and not w.sage_called:
            trigger = Trigger(fired[0].name, fired[0].rule, {**fired[0].evidence, "all_triggers": [f.name for f in fired]})
            action, system = self._call_sage(w, trigger, valid, prop, swift_action)
            if action is not None:
                return action, system
        if swift_action is not None:
            return swift_action, "swift"
        # SRM dropped every Swift candidate it tried and Sage gave nothing: the next admissible one, else look
        checked = {d.proposed for d in w.gate1 if d.source == "swift"}
        for cand in [c for c in ranked if c not in checked]:
            d = gate.check(cand, "swift", self._gate_ctx(valid, w.step), fallback=True)
            w.gate1.append(d)
            if d.decision != DROP:
                return d.result, "swift"
        if srm.gate1_rerank_admissible and getattr(self.swift, "reranks", True):
            hit = self._rerank_admissible(w, valid, set(checked) | set(ranked))
            if hit is not None:
                return hit, "swift"
        w.emit(NothingAdmissible())
        return "look around", "swift"

    def _rerank_admissible(self, w: StepDraft, valid: Sequence[str], tried: set[str]) -> str | None:
        """Every candidate Swift ranked was dropped (ScienceWorld's valid-action list can name objects that mixing
        or pouring has used up, and those fill Swift's top ranks): Swift ranks again over only the valid actions
        Gate-1 admits (no focus: Swift did not choose one), rather than 'look around', which changes nothing
        and so meets the same dead end next step."""
        ctx = self._gate_ctx(valid, w.step)
        admissible = [v for v in valid if v not in tried and not is_focus(v)
                      and self.parts.gate.check(v, "swift", ctx, fallback=True).decision != DROP]
        if not admissible:
            return None
        t0 = time.perf_counter()
        again = self.swift.propose(self.state.swift_state, admissible)
        w.timings["swift_rerank"] = time.perf_counter() - t0
        pick = next((a for a, _s in again.valid_ranked if a in admissible), None)
        if pick is None:
            return None
        w.emit(AdmissibleRerank(admissible=len(admissible), action=pick,
                                ranked=[a for a, _s in again.valid_ranked[:5]]))
        return pick

    def _t1_fires(self, prop: SwiftProposal, valid: Sequence[str]) -> bool:
        """AMM T1's trigger (`amm.t1_trigger`): when the controller's own invalid rule fires, or (the earlier rule)
        whenever Swift's unconstrained top guess is not a valid action."""
        keys = {action_key(v) for v in valid}
        if self.cfg.amm.t1_trigger == "top1":
            return action_key(prop.top1) not in keys
        return invalid_fires(prop, keys, self.cfg.controller)

    def _t1(self, w: StepDraft, valid: Sequence[str], prop: SwiftProposal) -> SwiftProposal:
        """AMM T1: Swift's top action is invalid. Retrieve what worked, retry Swift once with at most 3 records
        in a short memory field; a valid retry among Swift's own top k valid actions (`amm.t1_retry_top_k`)
        replaces the proposal, otherwise the invalid trigger calls Sage."""
        st = self.state
        ss = st.swift_state
        with timed(w, "amm"):
            r = self.amm.t1(w.step, self.last.room, ss.inventory, st.sage_history, prop.top1, look=ss.look)
        w.retrievals.append(r)
        if r.injected_into != "swift":
            return prop
        with timed(w, "swift"):
            retry = self.swift.propose(ss, valid, memory=r.injected_text)
            if self.parts.loop_guard_streak is not None:
                retry = apply_loop_guard(retry, ss.history, self.parts.loop_guard_streak)
        ok = action_key(retry.top1) in {action_key(v) for v in valid}
        k = self.cfg.amm.t1_retry_top_k
        outside = ok and k > 0 and action_key(retry.top1) not in {action_key(a) for a, _s in prop.valid_ranked[:k]}
        d = T1Retry(retry=retry.top1, replaced=prop.top1, valid=ok, outside_top_k=k if outside else 0)
        r.outcome = d.describe().removeprefix("AMM T1: ")
        w.emit(d)
        return retry if ok and not outside else prop
