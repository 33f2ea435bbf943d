"""Views over step records: the panels and charts the pages draw (docs/AGENT.md §9: the app only reads records).

Everything here renders from an episode's header and step records alone (agent_core.trace), so a live
run and a recorded trace look the same and replay never calls a model. This package may import
agent_core.trace / palette / config, never the agent itself (agent_core.controller), and nothing here
imports pages/.

- views.common: the plain-words texts ("What is this?"), colours as HTML chips, who acts next.
- views.charts: the Plotly mode timeline and score trajectory.
- views.run_panels: the Run page's panels of one step and the step list; `render_episode` draws them all.
- views.srm_panels: Gate-1, the ambiguity menu, the stagnation report and the Critic (SRM).
"""
from views.charts import score_figure, timeline_figure
from views.common import episode_mechanisms, next_hint, pending_actions
from views.run_panels import render_episode, render_step_detail

__all__ = ["episode_mechanisms", "next_hint", "pending_actions", "render_episode", "render_step_detail",
           "score_figure", "timeline_figure"]
