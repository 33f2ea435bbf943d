"""SRM, self-reflection (docs/AGENT.md §6): Gate-1 (gate1.py), the stagnation detector (stagnation.py),
the bounded Critic (critic.py) and Swift's loop guard (loop_guard.py). The controller runs them when
`srm.enabled`; each writes typed records into the step (agent_core.trace)."""
