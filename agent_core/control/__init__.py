"""The live step's parts, by concern: each module holds one side of what `agent_core.controller.Agent` does in a
step (switching, the buffer, Sage's turn, Swift's turn, SRM's hooks, replay / resume / fork) plus the Swift policies
and the step draft. They decide on the step's working copy of the state; `agent_core.episode.apply` commits."""
