"""Sage's turn: the context it is shown, a planning call (with AMM's T4 hints), and the focus review."""
from __future__ import annotations

import time
from collections import deque
from typing import Sequence

from ..actions import action_key, is_focus, never_a_focus_target
from ..decisions import FocusReview, OptionScores, SageFallback, SagePick, SageProblem
from ..episode import Buffered
from ..sage import SageContext
from ..swift.model import SwiftProposal
from ..trace import Trigger
from .draft import StepDraft, timed


class SageTurn:
    """Part of `agent_core.controller.Agent` (a mixin: it reads the agent's attributes)."""

    def _sage_context(self, trigger: Trigger | None, prop: SwiftProposal | None, action: str | None,
                      valid: Sequence[str] = ()) -> SageContext:
        ss = self.state.swift_state
        why = ""
        if trigger is not None:
            why = f"You are called because a switching rule fired: {trigger.rule}."
            if prop is not None:
                proposed = action or prop.action
                if trigger.name == "critical":
                    why += (f" My instinct (Swift, the fast policy) tells me to '{proposed}'. A wrong 'focus on' "
                            f"ends the task: check that this is the object the task asks for before committing.")
                elif trigger.name == "invalid":
                    why += f" My instinct (Swift) was '{prop.top1}', which the game does not accept here."
                else:
                    why += f" My instinct (Swift) proposes '{proposed}'."
        focus: list[str] = []
        if trigger is not None and trigger.name == "critical" and prop is not None:
            # Sage reviews the focus by comparing the targets in view, most likely first, not from scratch
            unnamed = {action_key(a) for a in prop.focus_unnamed}
            keep = {action_key(v) for v in valid}  # without the targets Sage's task check left out
            focus = [a for a, _p in prop.focus if action_key(a) in keep] or [
                a for a in valid if is_focus(a) and not never_a_focus_target(a) and action_key(a) not in unnamed]
        ranked = [a for a, _s in prop.valid_ranked] if prop is not None else []
        if valid and hasattr(self.swift, "rank") and self.cfg.sage.grounding == "numbered":
            ranked = self.swift.rank(ss, valid, self.cfg.sage.swift_choices)
        return SageContext(task=ss.task_description, look=ss.look, inventory=ss.inventory, score=ss.score,
                           time=len(self.records), history=self.state.sage_history, task_name=self.env.task.name,
                           worked_examples=self._examples, called_because=why, valid=list(valid),
                           swift_ranked=ranked, focus=focus)

    def _call_sage(self, w: StepDraft, trigger: Trigger, valid: Sequence[str], prop: SwiftProposal | None = None,
                   swift_action: str | None = None) -> tuple[str | None, str]:
        st = self.state
        w.trigger, w.sage_called = trigger, True
        ctx = self._sage_context(trigger, prop, swift_action, self._sage_options(w, valid))
        if trigger.name == "critical" and self.cfg.controller.focus_review == "choose" and ctx.focus:
            return self._review_focus(w, ctx, prop, valid)
        if self.amm is not None:  # T4: every planning call gets at most 5 records, as hints
            with timed(w, "amm"):
                failed = st.buffer_failures > 0 or any(r.action_valid is False or r.reward < 0
                                                       for r in self.records[-self.cfg.amm.recent_window:])
                r = self.amm.t4(w.step, self.last.room, st.swift_state.inventory, st.sage_history, failed)
            w.retrievals.append(r)
            ctx.memory = r.injected_text  # "" when nothing was found or the retrieval failed: the prompt is unmodified
        t0 = time.perf_counter()
        res = self.sage.think(ctx)
        w.timings["sage"] = w.timings.get("sage", 0.0) + time.perf_counter() - t0
        if self.amm is not None and (res.plan or res.actions):
            with timed(w, "amm"):
                w.writes += self.amm.write_plan(w.step, res.plan, res.actions)
        w.llm_calls += res.llm_calls
        for p in res.problems:
            w.emit(SageProblem(text=p))
        if res.scores:
            parts = [res.score_parts.get(o) for o, _s in res.scores]
            w.emit(OptionScores(purpose="ground", options=[o for o, _s in res.scores], scores=[s for _o, s in res.scores],
                                rule=res.score_rule, reply=[p[0] for p in parts if p], alone=[p[1] for p in parts if p]))
        if res.options:
            for a in res.actions:
                w.emit(SagePick(action=a, option=res.options.index(a) + 1 if a in res.options else None,
                                of=len(res.options)))
        if res.plan:
            st.plan = res.plan
        if res.error:
            w.emit(SageFallback(reason="failed", error=str(res.error)))
            return None, ""
        if res.deferred:
            w.emit(SageFallback(reason="deferred", error=res.deferred))
            return None, ""
        if not res.actions:
            return None, ""
        st.buffer = deque(Buffered(a, "sage") for a in res.actions)
        st.mode, st.buffer_failures = "sage", 0
        w.buffer_before = list(res.actions)
        action, system = self._take_buffered(w, valid)
        if action is None:
            st.mode = "swift"
            w.emit(SageFallback(reason="nothing_passed"))
        return action, system

    def _review_focus(self, w: StepDraft, ctx: SageContext, prop: SwiftProposal | None,
                      valid: Sequence[str]) -> tuple[str | None, str]:
        """The critical trigger under `controller.focus_review = choose`: Sage compares the focus targets in view
        and names one (it is buffered and checked like any Sage action) or says none is right yet (Swift's best
        non-focus action is taken instead). A failed or unreadable answer falls back to Swift's action."""
        st = self.state
        with timed(w, "sage"):
            res = self.sage.review_focus(ctx)
        w.llm_calls += res.llm_calls
        for p in res.problems:
            w.emit(SageProblem(text=p))
        if res.scores:
            w.emit(OptionScores(purpose="focus_review", options=[o for o, _s in res.scores],
                                scores=[s for _o, s in res.scores]))
        if res.error:
            w.emit(SageFallback(reason="failed", error=str(res.error)))
            return None, ""
        if res.picked_how == ["none"]:
            # Swift's best other action; with none ranked, 'look around' (changes nothing) rather than the focus
            alt = self._best_non_focus(prop, valid) or "look around"
            w.emit(FocusReview(picked="", of=len(res.options), instead=alt))
            return alt, "swift"
        if not res.actions:
            w.emit(SageFallback(reason="no_focus_target"))
            return None, ""
        pick = res.actions[0]
        w.emit(FocusReview(picked=pick, option=res.options.index(pick) + 1, of=len(res.options)))
        st.buffer = deque([Buffered(pick, "sage")])
        st.mode, st.buffer_failures = "sage", 0
        w.buffer_before = [pick]
        action, system = self._take_buffered(w, valid)
        if action is None:
            st.mode = "swift"
        return action, system

    def _best_non_focus(self, prop: SwiftProposal | None, valid: Sequence[str]) -> str | None:
        ranked = [a for a, _s in prop.valid_ranked] if prop is not None else []
        others = [a for a in ranked if not is_focus(a)]
        if not others and hasattr(self.swift, "rank"):
            others = self.swift.rank(self.state.swift_state, [v for v in valid if not is_focus(v)], 3)
        return others[0] if others else None
