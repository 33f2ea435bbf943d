"""The mechanisms a config switches on, built once when the agent is made. The step reads `parts.gate is None`
rather than a flag, so what runs is decided in one place and the header's mechanism list comes from the same
object."""
from __future__ import annotations

from dataclasses import dataclass

from ..config import Config
from ..llm import LLMBackend
from ..srm.critic import Critic
from ..srm.gate1 import Gate1


@dataclass(frozen=True)
class Parts:
    sage: bool                      # Sage may be called (controller.sage_enabled); off: Swift alone
    gate: Gate1 | None              # SRM's Gate-1 on every proposal (None: SRM off, Baseline maps Sage's text)
    stagnation: bool                # SRM's stagnation detector after every step
    critic: Critic | None           # SRM's bounded Critic, served from stagnation reports
    loop_guard_streak: int | None   # SRM's loop guard on Swift's proposal (None: off)
    swift_focus_check: bool         # Swift's focus targets the task does not name are skipped
    sage_focus_check: bool          # ... and refused to Sage and its buffer
    amm: bool                       # the episodic memory (the agent holds the store itself: `Agent.amm`)
    amm_swift_injection: bool

    @classmethod
    def wire(cls, cfg: Config, llm: LLMBackend) -> "Parts":
        srm = cfg.srm
        return cls(sage=cfg.controller.sage_enabled,
                   gate=Gate1(srm) if srm.enabled else None,
                   stagnation=srm.enabled,
                   critic=Critic(llm, srm, temperature=cfg.sage.temperature)
                   if srm.enabled and srm.critic_enabled else None,
                   loop_guard_streak=srm.loop_guard_streak if srm.enabled and srm.loop_guard and (
                       srm.loop_guard_with_sage or not cfg.controller.sage_enabled) else None,
                   swift_focus_check=cfg.swift.task_focus_check,
                   sage_focus_check=cfg.sage.task_focus_check,
                   amm=cfg.amm.enabled, amm_swift_injection=cfg.amm.enabled and cfg.amm.swift_injection)

    def names(self) -> list[str]:
        """What actually runs: the episode header lists it and the app shows only these panels."""
        out = ["swift"] + (["task_focus"] if self.swift_focus_check else []) + (["sage"] if self.sage else []) + \
            (["sage_task_focus"] if self.sage and self.sage_focus_check else [])
        if self.amm:
            out += ["amm"] + (["amm_swift_injection"] if self.amm_swift_injection else [])
        if self.gate is not None:
            out += ["gate1"]
        if self.stagnation:
            out += ["stagnation"]
        if self.critic is not None:
            out += ["critic"]
        if self.loop_guard_streak is not None:
            out += ["loop_guard"]
        return out
