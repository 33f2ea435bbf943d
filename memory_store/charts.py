"""The score-breakdown chart of a retrieval, shared by the Memory explorer and the Run page's Memory panel
so a retrieved memory looks the same everywhere: one stacked bar per memory, weight x normalized recency,
importance and relevance."""
from __future__ import annotations

from typing import Mapping, Sequence

import plotly.graph_objects as go

from memory_store.scoring import ScoredCandidate

PART_COLORS = {"recency": "#B279A2", "importance": "#E45756", "relevance": "#72B7B2"}


def breakdown_figure(ranked: Sequence[ScoredCandidate], weights: Mapping[str, float],
                     labels: Sequence[str] | None = None, title: str = "Score breakdown of the retrieved memories",
                     bar_height: int = 36) -> go.Figure:
    labels = list(labels) if labels is not None else [f"#{c.rank} {c.id}" for c in ranked]
    fig = go.Figure()
    for part in ("recency", "importance", "relevance"):
        w = float(weights.get(part, 1.0))
        fig.add_bar(name=f"{part} (w={w:g})", y=labels, x=[w * getattr(c, f"{part}_n") for c in ranked],
                    orientation="h", marker_color=PART_COLORS[part],
                    customdata=[[getattr(c, part), getattr(c, f"{part}_n"), c.description[:90]] for c in ranked],
                    hovertemplate=f"{part}: raw %{{customdata[0]:.3f}}, normalized %{{customdata[1]:.3f}}"
                                  "<br>%{customdata[2]}<extra></extra>")
    fig.update_layout(barmode="stack", height=120 + bar_height * len(ranked), margin=dict(l=10, r=10, t=60 if title else 30, b=10),
                      yaxis=dict(autorange="reversed"), xaxis_title="score", title=title,
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return fig
