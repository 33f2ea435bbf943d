"""The action buffer: Sage's (or the Critic's) actions run first in, first out, each checked by Gate-1 under SRM
or mapped onto a valid action under Baseline; the options Sage may choose from."""
from __future__ import annotations

from typing import Sequence

from ..actions import action_key, is_focus
from ..decisions import BufferDrop, BufferFailLimit, UnnamedFocusRefused
from ..episode import Buffered
from ..sage import map_action
from ..srm.gate1 import DROP
from .draft import StepDraft
from .policies import unnamed_in_state


class BufferTurn:
    """Part of `agent_core.controller.Agent` (a mixin: it reads the agent's attributes)."""

    def _sage_options(self, w: StepDraft, valid: Sequence[str]) -> list[str]:
        """The valid actions Sage may choose from: without the focus targets the task does not name
        (sage.task_focus_check), which the step records once."""
        if not self.parts.sage_focus_check:
            return list(valid)
        if w.sage_unnamed is None:
            w.sage_unnamed = unnamed_in_state(self.state.swift_state, valid)
        drop = {action_key(a) for a in w.sage_unnamed}
        return [v for v in valid if action_key(v) not in drop]

    def _unnamed_focus(self, w: StepDraft, valid: Sequence[str], action: str) -> bool:
        """A buffered LLM action that lands on a focus the task does not name is not played."""
        if not self.parts.sage_focus_check or not is_focus(action):
            return False
        self._sage_options(w, valid)
        if action_key(action) not in {action_key(a) for a in w.sage_unnamed or []}:
            return False
        w.refused.append(action)
        w.emit(UnnamedFocusRefused(action=action))
        return True

    def _take_buffered(self, w: StepDraft, valid: Sequence[str]) -> tuple[str | None, str]:
        """Pop buffered actions until one passes Gate-1 (SRM) or maps onto a valid action (Baseline)."""
        st, srm, gate = self.state, self.cfg.srm, self.parts.gate
        tries = 0
        while st.buffer and (gate is None or tries < srm.gate1_max_buffer_tries):
            item: Buffered = st.buffer.popleft()
            tries += 1
            if gate is not None:
                if item.gated_step == w.step:  # admitted by Gate-1 a moment ago, in this very state
                    if not self._unnamed_focus(w, valid, item.text):
                        return item.text, item.source
                else:
                    d = gate.check(item.text, item.source, self._gate_ctx(valid, w.step))
                    w.gate1.append(d)
                    if d.decision != DROP:
                        if not self._unnamed_focus(w, valid, d.result):
                            return d.result, item.source
                    else:
                        w.drops += 1
                        w.emit(BufferDrop(action=item.text, by="gate1", detail=d.detail))
            else:
                ss = st.swift_state
                m = map_action(item.text, valid, self.cfg.sage.map_similarity_threshold, self.embedder,
                               context=ss.look + "\n" + ss.inventory)
                w.mappings.append(m)
                if m.mapped is not None:
                    if not self._unnamed_focus(w, valid, m.mapped):
                        return m.mapped, item.source
                else:
                    w.emit(BufferDrop(action=item.text, by="mapping", detail=m.reason or ""))
            st.buffer_failures += 1
            if st.buffer_failures >= self.cfg.controller.buffer_fail_limit:
                w.emit(BufferFailLimit(failures=st.buffer_failures, when="now"))
                st.buffer.clear()
                break
            if gate is not None and w.drops >= srm.gate1_drops_for_sage and not w.sage_called:
                break  # two drops in one step: Sage decides this step (once)
        return None, ""
