"""The Memory explorer's charts: how recency fades and how important memories are, and a 2D map of the
memories' embeddings."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from memory_store import MEMORY_TYPES, TYPE_COLORS, MemoryStream
from memory_store.scoring import recency as recency_curve
from views.common import html_text


def panel_recency_importance(stream: MemoryStream, frame: pd.DataFrame) -> None:
    c = stream.config
    left, right = st.columns(2)
    with left:
        st.caption(f"What is this? Recency fades by a factor {c.recency_decay} per time step since a memory "
                   "was last used; each dot is a memory at the current time.")
        now = float(stream.latest_time)
        horizon = max(200.0, float((now - frame["last access"]).max() or 0) * 1.1) if len(frame) else 1000.0
        xs = np.linspace(0, horizon, 300)
        fig = go.Figure()
        fig.add_scatter(x=xs, y=recency_curve(horizon, horizon - xs, c.recency_decay),
                        mode="lines", name=f"{c.recency_decay}^t", line_color="#888")
        half = np.log(0.5) / np.log(c.recency_decay)
        fig.add_vline(x=half, line_dash="dot", annotation_text=f"half-life {half:.0f} steps")
        for t in MEMORY_TYPES:
            sub = frame[frame["type"] == t]
            if len(sub):
                dt = np.maximum(now - sub["last access"].to_numpy(), 0)
                fig.add_scatter(x=dt, y=c.recency_decay ** dt, mode="markers", name=t,
                                marker_color=TYPE_COLORS[t],  # the memory's words: Plotly renders them as HTML
                                text=(sub["id"] + ": " + sub["description"].str[:70]).map(html_text),
                                hovertemplate="%{text}<br>%{x:.0f} steps ago<extra></extra>")
        fig.update_layout(title="Recency decay", xaxis_title="time steps since last access",
                          yaxis_title="recency", height=380, margin=dict(l=10, r=10, t=40, b=10))
        st.plotly_chart(fig, key="mem_decay")
    with right:
        st.caption("What is this? How important the LLM rated each memory, from 1 (mundane) to 10 "
                   "(poignant); important memories are retrieved more readily.")
        fig = go.Figure()
        for t in MEMORY_TYPES:
            sub = frame[frame["type"] == t]
            if len(sub):
                fig.add_histogram(x=sub["importance"], name=t, marker_color=TYPE_COLORS[t],
                                  xbins=dict(start=0.5, end=10.5, size=1))
        fig.update_layout(barmode="stack", title="Importance", xaxis_title="importance (1-10)",
                          yaxis_title="memories", height=380, margin=dict(l=10, r=10, t=40, b=10))
        st.plotly_chart(fig, key="mem_importance")
    since = stream.importance_since_last_reflection()
    if len(frame) and "reflection" in set(frame["type"]):
        text = (f"Importance since the last reflection: {since:g} / {c.reflection_threshold:g} (the agent "
                "reflects after an episode once it passes the threshold)")
    else:  # "since the last reflection" would claim one happened
        text = (f"No reflection in this store yet. Importance of its memories: {since:g}, threshold "
                f"{c.reflection_threshold:g}. " + ("The agent reflects after an episode once the sum passes the "
                "threshold, when an LLM is attached (a store written without one, such as the warm-up's, never "
                "reflects)." if since > c.reflection_threshold else "The agent reflects after an episode once the "
                "sum passes the threshold."))
    st.progress(min(1.0, since / max(c.reflection_threshold, 1e-9)), text=text)


@st.cache_data(show_spinner=False, max_entries=8)
def _project(emb: np.ndarray, method: str) -> np.ndarray:
    if len(emb) < 3:
        return np.column_stack([np.arange(len(emb), dtype=float), np.zeros(len(emb))])
    if method == "t-SNE":
        from sklearn.manifold import TSNE

        return TSNE(2, perplexity=min(30.0, (len(emb) - 1) / 3), init="pca", random_state=0).fit_transform(emb)
    from sklearn.decomposition import PCA

    return PCA(2, random_state=0).fit_transform(emb)


def panel_projection(stream: MemoryStream, frame: pd.DataFrame, max_points: int = 5000) -> None:
    st.caption("What is this? Each dot is a memory placed by the meaning of its text (its embedding squeezed "
               "into 2D): memories about similar things sit close together.")
    method = st.radio("Projection", ["PCA", "t-SNE"], horizontal=True, key="mem_proj",
                      help="PCA is fast and stable; t-SNE separates clusters better but is slower.")
    emb = stream.embeddings()
    idx = np.arange(len(emb))
    limit = max_points if method == "PCA" else min(max_points, 2000)  # t-SNE is slow on large sets
    if len(idx) > limit:  # a readable, fast plot: a fixed random sample of large stores
        idx = np.sort(np.random.default_rng(0).choice(len(idx), limit, replace=False))
        st.caption(f"Showing a random sample of {limit} of {len(emb)} memories.")
    xy = _project(emb[idx], method)
    sub = frame.iloc[idx]
    fig = go.Figure()
    for t in MEMORY_TYPES:
        sel = (sub["type"] == t).to_numpy()
        if sel.any():
            fig.add_scatter(x=xy[sel, 0], y=xy[sel, 1], mode="markers", name=t, marker_color=TYPE_COLORS[t],
                            text=(sub["id"] + ": " + sub["description"].str[:90]).map(html_text)[sel],
                            hovertemplate="%{text}<extra></extra>")
    fig.update_layout(title=f"Embedding map ({method})", height=480, margin=dict(l=10, r=10, t=40, b=10))
    st.plotly_chart(fig, key="mem_projection")
