"""Self-reflection's parts of a step: Gate-1's context, the ambiguity menu's answer, the Critic serving a
stagnation report, and the last safeguard before the environment."""
from __future__ import annotations

import time
from collections import deque
from typing import Sequence

from ..actions import action_key, is_focus, strip_decorations
from ..decisions import CriticWaiting, Safeguard
from ..episode import Buffered
from ..episode.reducer import menu_key
from ..srm.critic import CriticContext, limit_moves
from ..srm.gate1 import DROP, GateContext, menu_choice
from ..trace import CriticCall, Gate1Decision, MenuChoice
from .draft import LazyEmbedder, StepDraft


class SRMHooks:
    """Part of `agent_core.controller.Agent` (a mixin: it reads the agent's attributes)."""

    def _gate_ctx(self, valid: Sequence[str], step: int) -> GateContext:
        st, ss = self.state, self.state.swift_state
        # a stagnation report's list and "no focus" bind Swift and Sage only under avoid_binds = "all" (else they
        # reach the Critic's prompt alone)
        live = self.cfg.srm.avoid_binds == "all" and step <= st.avoid_until
        return GateContext(valid=valid, look=ss.look, inventory=ss.inventory, focus_done=st.focus_done,
                           focus_unrewarded=st.focus_unrewarded,
                           focus_unrewarded_gold=self._focus_unrewarded_gold, focus_limit=self._focus_limit,
                           focused=tuple(st.focused),
                           avoid=st.avoid if live else (), no_focus=live and bool(st.avoid),
                           embedder=LazyEmbedder(lambda: self.embedder),
                           object_names=getattr(getattr(self, "env", None), "object_names", None),
                           reach=getattr(getattr(self, "env", None), "reach", None))

    def _answer_menu(self, w: StepDraft) -> tuple[str, str]:
        """ScienceWorld asked which of several objects was meant: answer with a number, deliberately."""
        st = self.state
        options = self.last.menu
        request = self.records[-1].action if self.records else ""
        if self.parts.gate is not None:
            # the same menu (same options) coming back means the last answer led nowhere: try another option
            key = menu_key(options)
            i, why = menu_choice(request, options, st.menu_tried.get(key, []), task=st.swift_state.task_description)
            if i >= 0:
                st.menu_tried.setdefault(key, []).append(i)
            w.gate1.append(Gate1Decision(source="menu", proposed=request, decision="ACCEPT", result=str(i) if i >= 0
                                         else "", reason="MENU_CHOICE" if i >= 0 else "MENU_CANCEL",
                                         normalized=str(i), detail=why))
            chooser = "gate1"
        else:  # SwiftSage answers an ambiguity menu with its first option
            i, why, chooser = 0, "the first option (0), as SwiftSage does; Gate-1 is off in this preset", "default"
        w.menu = MenuChoice(request=request, options=list(options), chosen=i, chooser=chooser, why=why)
        # a blank answer cancels the menu (the game's own prompt says so)
        return (str(i) if i >= 0 else ""), (self.records[-1].system if self.records else "swift")

    def _critic_before_step(self, w: StepDraft, valid: Sequence[str]) -> None:
        """Serve a pending stagnation report: call the Critic if its rules allow, else record why not."""
        st, c = self.state, self.cfg.srm
        rep = st.pending_report
        if rep is None or self.parts.critic is None:
            return
        rstep = st.pending_report_step

        def skip(status: str, reason: str) -> None:
            w.critic = CriticCall(status=status, report_step=rstep, reason=reason, budget_used=st.critic_calls,
                                  budget=c.critic_budget, buffer_policy=c.critic_buffer_policy)
            st.pending_report = None

        if any(r.reward > 0 for r in self.records if r.step > rstep):
            return skip("cancelled", "a positive reward came after the report: the agent is making progress again")
        if st.critic_calls >= c.critic_budget:
            return skip("budget_exhausted", f"all {c.critic_budget} Critic calls of this episode are used")
        if st.last_critic_step is not None and w.step - st.last_critic_step <= c.critic_cooldown_steps:
            return skip("cooldown", f"the last Critic call was {w.step - st.last_critic_step} step(s) ago; the "
                                    f"cooldown is {c.critic_cooldown_steps} steps")
        if w.step <= st.critic_backoff_until:
            return skip("cooldown", f"backing off until step {st.critic_backoff_until + 1}: the last answer only "
                                    f"repeated recent actions")
        if c.critic_wait_for_empty_buffer and st.mode == "sage" and st.buffer:
            if w.step - rstep > c.critic_report_ttl_steps:
                return skip("expired", f"the buffer was still busy {c.critic_report_ttl_steps} steps after the "
                                       f"report (srm.critic_report_ttl_steps)")
            w.critic = CriticCall(status="waiting", report_step=rstep, budget_used=st.critic_calls,
                                  budget=c.critic_budget, buffer_policy=c.critic_buffer_policy,
                                  reason="the report waits for the action buffer to empty before the Critic runs")
            w.emit(CriticWaiting(report_step=rstep))
            return
        ss = st.swift_state
        hist = [(r.action, r.observation, r.reward) for r in self.records]  # every step, no-ops included
        ctx = CriticContext(task=ss.task_description, look=ss.look, inventory=ss.inventory, score=ss.score,
                            time=len(self.records), history=hist, report=rep, valid=valid,
                            plan=" ".join(st.plan.values()) if st.plan else "")
        if c.critic_valid_order == "ranked" and hasattr(self.swift, "rank"):
            ctx.swift_ranked = self.swift.rank(ss, [v for v in valid if not is_focus(v)], 10)
        if self.amm is not None:  # Full: the cached T2 / T3 records are the Critic's evidence
            ev = self.amm.critic_evidence(w.step, st.amm_t2, st.amm_t3)
            if ev is not None:
                w.retrievals.append(ev)
                ctx.memory = ev.injected_text
        t0 = time.perf_counter()
        call, ans = self.parts.critic.ask(ctx)
        w.timings["critic"] = time.perf_counter() - t0
        w.llm_calls.append(call)
        st.critic_calls += 1
        st.last_critic_step = w.step
        st.pending_report = None
        cc = CriticCall(status="called", report_step=rstep, prompt=call.prompt, output=call.output,
                        diagnosis=ans.diagnosis, course_correction=ans.course_correction, actions=list(ans.actions),
                        buffer_policy=c.critic_buffer_policy, budget_used=st.critic_calls, budget=c.critic_budget,
                        latency_s=round(call.latency_s, 3), problems=list(ans.problems))
        w.critic = cc
        if call.error:
            cc.status, cc.error = "failed", call.error
            cc.reason = "the Critic's LLM call failed; the agent goes on without it"
            return
        kept, extra_moves = limit_moves(ans.actions, c.critic_max_moves)
        if extra_moves:
            cc.problems.append(f"more than {c.critic_max_moves} move(s): left out {extra_moves}")
        # The first action is checked in full now (it runs in this state); later ones only for what does not
        # depend on the state (they are checked in full when their turn comes, after the first has run).
        admitted: list[str] = []
        for a in kept:
            if not admitted:
                d = self.parts.gate.check(a, "critic", self._gate_ctx(valid, w.step))
                w.gate1.append(d)
                text = d.result if d.decision != DROP else None
            else:
                d = self.parts.gate.precheck(a, "critic")
                if d is not None:
                    w.gate1.append(d)
                text = None if d is not None else strip_decorations(a)[0]
            if text is not None and action_key(text) not in {action_key(x) for x in admitted}:
                admitted.append(text)
        recent = {action_key(r.action) for r in self.records[-c.critic_repeat_window:]}
        if not admitted:
            cc.reason = "none of its actions passed Gate-1: nothing entered the buffer"
            return
        if all(action_key(a) in recent for a in admitted):
            cc.status = "repeat_skipped"
            cc.reason = (f"every action repeats one of the last {c.critic_repeat_window} actions: skipped; the Critic "
                         f"backs off for {c.critic_repeat_backoff_steps} steps")
            st.critic_backoff_until = w.step + c.critic_repeat_backoff_steps
            return
        cc.admitted = admitted
        items = [Buffered(a, "critic", gated_step=w.step if i == 0 else 0) for i, a in enumerate(admitted)]
        if c.critic_buffer_policy == "append":
            st.buffer.extend(items)
        else:
            st.buffer = deque(items)
        st.mode, st.buffer_failures = "sage", 0
        w.buffer_before = [b.text for b in st.buffer]
        cc.reason = f"{len(admitted)} action(s) passed Gate-1 and entered the buffer ({c.critic_buffer_policy})"

    def _only_valid(self, action: str, valid: Sequence[str], w: StepDraft) -> str:
        """The last safeguard before the JVM: only a valid action of this state (in its canonical spelling) or a
        number answering the game's own menu is sent. Text from an observation, a memory or an LLM answer that
        is not one never reaches ScienceWorld; 'look around' (changes nothing) is sent instead, with a note."""
        if not self.cfg.controller.only_valid_actions or (
                self.last is not None and self.last.menu and (action == "" or action.isdigit())):
            return action
        canon = {action_key(v): v for v in valid}.get(action_key(action))
        if canon is not None:
            return canon
        w.emit(Safeguard(proposed=action[:500]))
        return "look around"
