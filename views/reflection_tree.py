"""The Memory explorer's reflection tree: each reflection linked to the memories it cites, clickable both ways."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from memory_store import MEMORY_TYPES, TYPE_COLORS, MemoryStream
from views.common import html_text, md_text

S = st.session_state


def _focus(memory_id: str) -> None:
    S["mem_focus"] = memory_id


def panel_tree(stream: MemoryStream) -> None:
    st.caption("What is this? Reflections are conclusions the agent drew from other memories; each links to "
               "the memories it cites as evidence, so higher nodes are more abstract. Click a node or a link.")
    mems = {m.id: m for m in stream.memories()}
    refl = [m for m in mems.values() if m.type == "reflection"]
    if not refl:
        st.info("No reflections yet: the agent reflects once the summed importance passes the threshold.")
        return
    nodes = {m.id for m in refl} | {e for m in refl for e in m.evidence_ids if e in mems}
    # Leaves left to right in creation order; a parent sits above the mean of its evidence.
    x: dict[str, float] = {}
    for i, mid in enumerate(sorted((n for n in nodes if mems[n].type != "reflection"), key=lambda n: mems[n].seq)):
        x[mid] = float(i)
    for m in sorted(refl, key=lambda m: (m.depth, m.seq)):
        xs = [x[e] for e in m.evidence_ids if e in x]
        x[m.id] = float(np.mean(xs)) if xs else float(len(x))
    fig = go.Figure()
    ex, ey = [], []
    for m in refl:
        for e in m.evidence_ids:
            if e in x:
                ex += [x[m.id], x[e], None]
                ey += [m.depth, mems[e].depth, None]
    fig.add_scatter(x=ex, y=ey, mode="lines", line=dict(color="#bbb", width=1), hoverinfo="skip", name="evidence")
    for t in MEMORY_TYPES:
        ids = [n for n in nodes if mems[n].type == t]
        if ids:
            fig.add_scatter(x=[x[i] for i in ids], y=[mems[i].depth for i in ids], mode="markers", name=t,
                            marker=dict(color=TYPE_COLORS[t], size=[14 if t == "reflection" else 9 for _ in ids]),
                            customdata=ids, text=[html_text(f"{i}: {mems[i].description[:90]}") for i in ids],
                            hovertemplate="%{text}<extra></extra>")
    fig.update_layout(title="Reflection tree", yaxis_title="depth (0 = observation)", height=420,
                      xaxis=dict(showticklabels=False), yaxis=dict(dtick=1),
                      margin=dict(l=10, r=10, t=40, b=10))
    event = st.plotly_chart(fig, key="mem_tree", on_select="rerun", selection_mode="points")
    try:
        points = event.selection.points if event else []
    except AttributeError:
        points = []
    if points and points[0].get("customdata"):
        cd = points[0]["customdata"]
        picked = cd[0] if isinstance(cd, list) else cd
        # A chart selection persists across reruns: apply it only when it changes, so the
        # evidence buttons below can still move the focus.
        if picked != S.get("mem_tree_selected"):
            S["mem_tree_selected"] = picked
            S["mem_focus"] = picked
    options = [m.id for m in sorted(refl, key=lambda m: -m.seq)]
    focus = S.get("mem_focus")
    if focus not in mems:
        focus = options[0]
    st.selectbox("Reflection", options, index=options.index(focus) if focus in options else 0,
                 format_func=lambda i: f"{i} (depth {mems[i].depth}): {mems[i].description[:80]}",
                 key="mem_tree_pick", on_change=lambda: _focus(S["mem_tree_pick"]))
    m = mems[focus]
    st.markdown(f"**{md_text(m.id)}** · {md_text(m.type)} · depth {md_text(m.depth)} · importance {m.importance:g} · "
                f"created {m.created:g}\n\n> {md_text(m.description)}")  # the memory's own words, escaped
    left, right = st.columns(2)
    with left:
        st.markdown("**Evidence (cites)**")
        for e in m.evidence_ids:
            if e in mems:
                st.button(md_text(f"{e} · {mems[e].type}: {mems[e].description[:70]}"), key=f"mem_ev_{m.id}_{e}",
                          on_click=_focus, args=(e,))
        if not m.evidence_ids:
            st.caption("An observation or plan: a leaf of the tree.")
    with right:
        st.markdown("**Cited by**")
        parents = [r for r in refl if m.id in r.evidence_ids]
        for r in parents:
            st.button(md_text(f"{r.id}: {r.description[:70]}"), key=f"mem_par_{m.id}_{r.id}", on_click=_focus,
                      args=(r.id,))
        if not parents:
            st.caption("No reflection cites this memory yet.")
