"""Memory explorer: the Generative Agents memory stream the agent writes, and why a memory was retrieved.

Opens, by default, the store of the latest run that used memory (traces under SWIFTSAGE_RUNS_DIR, default
runs/), else SWIFTSAGE_MEMORY_DIR when set, else a read copy of the shipped warm store; the Run page's
"Open in the Memory explorer" button opens a run's store with one retrieval selected. Retrievals recorded
in traces (runs/**/*.jsonl, assets/episodes/**/*.jsonl) are shown exactly as recorded. Reads agent_core
only for the shipped store's location and the trace headers. Works under `streamlit run app.py` (listed by st.navigation) and standalone
(AppTest.from_file("pages/2_Memory.py")); never calls st.set_page_config.
"""
from __future__ import annotations

import json
import os
import sys
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # standalone runs (AppTest) start with pages/ as the script dir
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import streamlit as st  # noqa: E402

from memory_store import (MEMORY_TYPES, TYPE_COLORS, MemoryConfig, MemoryStream, RetrievalResult,  # noqa: E402
                          open_stream, seed_demo)
from memory_store.charts import breakdown_figure  # noqa: E402
from memory_store.scoring import recency as recency_curve  # noqa: E402
from views import share  # noqa: E402
from views.stores import default_store, is_store, short_path  # noqa: E402

RUNS_DIR = Path(os.environ.get("SWIFTSAGE_RUNS_DIR") or ROOT / "runs")
TRACE_DIRS = (RUNS_DIR, ROOT / "assets" / "episodes")
S = st.session_state


# ------------------------------------------------------------------ data helpers

def _open(path: str) -> MemoryStream:
    stream = open_stream(MemoryConfig(persist_dir=path))
    stream.refresh()  # the agent may have written since the last rerun (another process or reader)
    return stream


def _memory_frame(stream: MemoryStream) -> pd.DataFrame:
    rows = [{"id": m.id, "type": m.type, "tag": m.tag, "description": m.description,
             "importance": m.importance, "created": m.created, "last access": m.last_access,
             "task": m.task, "episode": m.episode, "depth": m.depth, "evidence": ", ".join(m.evidence_ids),
             "importance note": m.importance_error, "importance source": m.importance_source,
             "variation": m.extra.get("variation"), "step": m.extra.get("step"), "reward": m.extra.get("reward")}
            for m in stream.memories()]
    return pd.DataFrame(rows, columns=["id", "type", "tag", "description", "importance", "created",
                                       "last access", "task", "episode", "depth", "evidence",
                                       "importance note", "importance source", "variation", "step", "reward"])


def _result_of(r: Any) -> dict[str, Any] | None:
    """The RetrievalResult dict of a recorded retrieval: the agent's MemoryRetrieval nests it under `result`
    (None when that retrieval failed); a bare RetrievalResult dict is taken as it is."""
    if not isinstance(r, dict):
        return None
    if "candidates" in r and "query" in r:
        return r
    res = r.get("result")
    return res if isinstance(res, dict) else None


def _retrievals_from_obj(obj: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """RetrievalResult dicts found in a pasted/uploaded object: a result, a list, or a step record."""
    if isinstance(obj, list):
        out = []
        for i, o in enumerate(obj):
            out += _retrievals_from_obj(o, f"{where}[{i}]")
        return out
    if not isinstance(obj, dict):
        return []
    if "candidates" in obj and "query" in obj:
        return [(where, obj)]
    if isinstance(obj.get("retrievals"), list):
        step = obj.get("step")
        return [(f"step {step}" if step is not None else where, res) for r in obj["retrievals"]
                if (res := _result_of(r)) is not None]
    if _result_of(obj) is not None:
        return [(where, _result_of(obj))]
    return []


def read_trace_retrievals(text: str) -> tuple[list[tuple[str, dict[str, Any]]], list[int]]:
    """(label, retrieval dict) per recorded retrieval of a JSONL trace, and the numbers of lines
    that did not parse (skipped, reported to the user)."""
    found: list[tuple[str, dict[str, Any]]] = []
    bad: list[int] = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            bad.append(no)
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("retrievals"), list):
            continue  # header, summary, or a step without retrievals
        step = obj.get("step", no)
        for j, r in enumerate(obj["retrievals"]):
            res = _result_of(r)
            if res is not None:
                label = f"step {step} · #{j + 1} · {res.get('trigger', '?')} · {str(res.get('query', ''))[:60]}"
                found.append((label, res))
    return found, bad


def _parse_result(d: dict[str, Any]) -> RetrievalResult | None:
    try:
        return RetrievalResult.from_dict(d)
    except Exception as e:  # a malformed record is shown as a warning, never a crash
        st.warning(f"This retrieval record could not be read: {type(e).__name__}: {e}")
        return None


# ------------------------------------------------------------------ retrieval view

def render_retrieval(result: RetrievalResult, key: str) -> None:
    """Stacked score chart of a retrieval, with weight sliders that re-rank it live."""
    st.markdown(f"**Query:** {result.query!r} · trigger **{result.trigger}** · now = {result.now:g} · "
                f"top {result.k} of {result.eligible} eligible memories ({result.method}, "
                f"{result.examined} scored, {result.elapsed_ms:.1f} ms)")
    if result.filters:
        st.caption(f"Filters: {result.filters}")
    if not result.candidates:
        st.info("This retrieval found no memories." + (f" Error: {result.error}" if result.error else ""))
        return
    st.caption("What is this? Each bar is one retrieved memory; its length is the retrieval score, the sum "
               "of weight x normalized recency, importance and relevance (each scaled to 0-1 over the "
               "candidates). Move the sliders to see how the ranking changes with other weights.")
    cols = st.columns(4)
    w_rec = cols[0].slider("Recency weight", 0.0, 3.0, float(result.weights.get("recency", 1.0)), 0.1,
                           key=f"{key}_w_recency", help="How much being recently used counts.")
    w_imp = cols[1].slider("Importance weight", 0.0, 3.0, float(result.weights.get("importance", 1.0)), 0.1,
                           key=f"{key}_w_importance", help="How much the LLM's 1-10 importance counts.")
    w_rel = cols[2].slider("Relevance weight", 0.0, 3.0, float(result.weights.get("relevance", 1.0)), 0.1,
                           key=f"{key}_w_relevance", help="How much similarity to the query counts.")
    show_k = cols[3].number_input("Show top", 1, max(1, len(result.candidates)),
                                  min(result.k, len(result.candidates)), key=f"{key}_show_k",
                                  help="How many of the re-ranked memories to show.")
    weights = {"recency": w_rec, "importance": w_imp, "relevance": w_rel}
    ranked = result.rerank(weights, k=int(show_k))
    original = {cid: i for i, cid in enumerate(result.top_ids, 1)}
    fig = breakdown_figure(ranked, weights)
    st.plotly_chart(fig, key=f"{key}_chart")
    table = pd.DataFrame([{
        "rank": c.rank, "recorded rank": original.get(c.id), "id": c.id, "type": c.type, "score": round(c.score, 4),
        "recency (n)": round(c.recency_n, 3), "importance (n)": round(c.importance_n, 3),
        "relevance (n)": round(c.relevance_n, 3), "recency": round(c.recency, 4), "importance": c.importance,
        "relevance": round(c.relevance, 4), "description": c.description} for c in ranked])
    table["recorded rank"] = table["recorded rank"].astype("Int64")  # blank, not NaN, for newcomers
    st.dataframe(table, hide_index=True, key=f"{key}_table")
    with st.expander(f"All {len(result.candidates)} recorded candidates and the raw record"):
        st.caption("Every memory that was scored (best first under the recorded weights); the bounds are "
                   "the min and max each score was normalized with.")
        st.json(result.bounds, expanded=False)
        st.dataframe(pd.DataFrame([c.to_dict() for c in result.candidates]), hide_index=True)
        st.json(result.to_dict(), expanded=False)


# ------------------------------------------------------------------ panels

def panel_table(stream: MemoryStream, frame: pd.DataFrame) -> None:
    st.caption("What is this? Every memory in the stream: what the agent observed, planned or concluded "
               "(reflections), with its importance and times; filter to find one.")
    c1, c2, c3, c4 = st.columns(4)
    types = c1.multiselect("Type", list(MEMORY_TYPES), key="mem_f_type")
    tags = c2.multiselect("Tag", sorted(t for t in frame["tag"].unique() if t), key="mem_f_tag")
    tasks = c3.multiselect("Task", sorted(t for t in frame["task"].unique() if t), key="mem_f_task")
    eps = c4.multiselect("Episode", sorted(e for e in frame["episode"].unique() if e), key="mem_f_episode")
    view = frame
    for col, chosen in (("type", types), ("tag", tags), ("task", tasks), ("episode", eps)):
        if chosen:
            view = view[view[col].isin(chosen)]
    st.caption(f"{len(view)} of {len(frame)} memories")
    st.dataframe(view, hide_index=True, key="mem_table")


def panel_query(stream: MemoryStream, frame: pd.DataFrame) -> None:
    st.caption("What is this? Ask the memory stream a question the way the agent does, and see why each "
               "memory came back: how recent, how important and how relevant it is.")
    q = st.text_input("Query", key="mem_query", placeholder="e.g. how do I boil water?")
    c1, c2, c3, c4 = st.columns(4)
    k = c1.number_input("k (memories returned)", 1, 50, stream.config.top_k, key="mem_k")
    now = c2.number_input("Now (time step)", value=float(stream.latest_time), key="mem_now",
                          help="Recency is measured from here; by default the latest time in the store.")
    types = c3.multiselect("Only types", list(MEMORY_TYPES), key="mem_q_types",
                           help="Restrict the candidates (and so the normalization) to these types.")
    touch = c4.checkbox("Update last access", value=False, key="mem_touch", disabled=not share.unlocked(),
                        help="The agent's retrievals refresh the retrieved memories' recency; "
                             "off here so exploring does not change the agent's memory (in a shared class only "
                             "the teacher may change it).") and share.unlocked()
    if st.button("Retrieve", key="mem_retrieve", type="primary", disabled=not q.strip()):
        with st.spinner("Embedding the query and scoring memories..."):
            result = stream.retrieve(q, now=now, k=int(k), types=types or None, update_access=touch)
        S["mem_result"] = result.to_dict()
        S["mem_result_n"] = S.get("mem_result_n", 0) + 1
    if S.get("mem_result"):
        render_retrieval(RetrievalResult.from_dict(S["mem_result"]), key=f"mem_q{S.get('mem_result_n', 0)}")


def panel_trace() -> None:
    st.caption("What is this? Open a retrieval the agent recorded in an episode trace (or paste one) and see "
               "the scores it had at that step, exactly as recorded.")
    files = sorted({str(p) for d in TRACE_DIRS if d.is_dir() for p in d.rglob("*.jsonl")})
    options = ["(none)"] + [short_path(p) for p in files]
    by_label = dict(zip(options[1:], files))
    choice = st.selectbox("Trace file", options, key="mem_trace_file",
                          help=f"Episode traces under {short_path(str(RUNS_DIR))} and assets/episodes/.")
    custom = st.text_input("...or a trace file path", key="mem_trace_path")
    path = Path(custom).expanduser() if custom.strip() else (Path(by_label[choice]) if choice != "(none)" else None)
    found: list[tuple[str, dict[str, Any]]] = []
    if path is not None and custom.strip():
        try:  # a shared app reads traces only under its own folders
            share.checked_path(custom, what="trace files")
        except share.PathRefused as e:
            st.error(str(e))
            path = None
    if path is not None:
        if not path.is_absolute() and not path.exists():
            path = ROOT / path
        try:
            text = path.read_text(errors="replace")
        except OSError as e:
            st.error(f"Cannot read {path}: {e}")
            text = ""
        found, bad = read_trace_retrievals(text)
        if bad:
            st.warning(f"Skipped {len(bad)} line(s) that did not parse (line {', '.join(map(str, bad[:10]))}"
                       f"{', ...' if len(bad) > 10 else ''}).")
        if text and not found:
            st.info("This trace records no retrievals.")
    pasted = st.text_area("...or paste a RetrievalResult JSON (or a step record with `retrievals`)",
                          key="mem_paste", height=100)
    upload = st.file_uploader("...or upload one (.json / .jsonl)", type=["json", "jsonl"], key="mem_upload")
    for src, raw in (("pasted", pasted), ("uploaded", upload.getvalue().decode("utf-8", "replace")
                                           if upload is not None else "")):
        if not raw.strip():
            continue
        try:
            found += _retrievals_from_obj(json.loads(raw), src)
        except json.JSONDecodeError:
            more, bad = read_trace_retrievals(raw)
            if bad:
                st.warning(f"The {src} text has {len(bad)} line(s) that did not parse; they were skipped.")
            found += more
    if not found:
        return
    labels = [f"{i + 1}. {lab}" for i, (lab, _) in enumerate(found)]
    pick = st.selectbox("Recorded retrieval", range(len(found)), format_func=lambda i: labels[i],
                        key="mem_trace_pick")
    result = _parse_result(found[pick][1])
    if result is not None:
        render_retrieval(result, key=f"mem_t{zlib.crc32(labels[pick].encode())}")


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
                                marker_color=TYPE_COLORS[t], text=sub["id"] + ": " + sub["description"].str[:70],
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
    st.progress(min(1.0, since / max(c.reflection_threshold, 1e-9)),
                text=f"Importance since the last reflection: {since:g} / {c.reflection_threshold:g} "
                     "(the agent reflects when it passes the threshold)")


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
                            customdata=ids, text=[f"{i}: {mems[i].description[:90]}" for i in ids],
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
    st.markdown(f"**{m.id}** · {m.type} · depth {m.depth} · importance {m.importance:g} · created {m.created:g}"
                f"\n\n> {m.description}")
    left, right = st.columns(2)
    with left:
        st.markdown("**Evidence (cites)**")
        for e in m.evidence_ids:
            if e in mems:
                st.button(f"{e} · {mems[e].type}: {mems[e].description[:70]}", key=f"mem_ev_{m.id}_{e}",
                          on_click=_focus, args=(e,))
        if not m.evidence_ids:
            st.caption("An observation or plan: a leaf of the tree.")
    with right:
        st.markdown("**Cited by**")
        parents = [r for r in refl if m.id in r.evidence_ids]
        for r in parents:
            st.button(f"{r.id}: {r.description[:70]}", key=f"mem_par_{m.id}_{r.id}", on_click=_focus, args=(r.id,))
        if not parents:
            st.caption("No reflection cites this memory yet.")


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
                            text=(sub["id"] + ": " + sub["description"].str[:90])[sel],
                            hovertemplate="%{text}<extra></extra>")
    fig.update_layout(title=f"Embedding map ({method})", height=480, margin=dict(l=10, r=10, t=40, b=10))
    st.plotly_chart(fig, key="mem_projection")


# ------------------------------------------------------------------ page

st.title("Memory explorer")
st.caption("The agent's memory stream (Generative Agents): everything it observed, planned and concluded, and "
           "why a memory was retrieved: score = recency + importance + relevance, each scaled to 0-1.")

request = S.pop("mem_open_request", None)  # from the Run page's "Open in the Memory explorer"
if request and request.get("store"):
    S["mem_dir"] = request["store"]
    S["mem_opened_retrieval"] = request
default_dir, why_default = default_store()
if "mem_dir" not in S:
    S["mem_dir"] = default_dir
store_dir = st.text_input("Memory store directory", key="mem_dir",
                          help=f"A Chroma store written by the agent. Default: {why_default}.")
st.caption(f"Default: {why_default}.")
with st.sidebar:
    share.passcode_box()
opened = S.get("mem_opened_retrieval")
if opened:
    with st.container(border=True):
        st.markdown(f"**Retrieval opened from the Run page:** {opened.get('label', '')}")
        st.caption("Exactly as the agent recorded it at that step (the trace keeps every candidate's scores, "
                   "so this works even when the store is gone). Move the weights to see how it would rank "
                   "with other weights.")
        result = _parse_result(opened["result"])
        if result is not None:
            render_retrieval(result, key="mem_opened")
        if st.button("Close", key="mem_opened_close"):
            S.pop("mem_opened_retrieval", None)
            st.rerun()

try:  # a shared app opens and creates stores only under its own folders; nothing outside is read
    share.checked_path(store_dir, what="memory stores")
except share.PathRefused as e:
    st.error(str(e))
    st.subheader("Retrievals recorded in traces")
    panel_trace()
    st.stop()
if not is_store(store_dir):
    st.warning(f"There is no memory store at {store_dir!r} (no chroma.sqlite3 there), so nothing was opened or "
               f"created. Enter the directory of a store, for example {default_dir!r}.")
    refusal = None
    try:
        share.checked_path(store_dir, what="memory stores", create=True)
    except share.PathRefused as e:
        refusal = str(e)
    if not share.unlocked():
        refusal = "In a shared class only the teacher (with the passcode) creates memory stores."
    if st.button("Create a small demo store there", key="mem_seed_new", disabled=refusal is not None,
                 help=refusal or "Writes a hand-written demo of ScienceWorld memories into a new store at this path."):
        with st.spinner("Embedding the demo memories..."):
            seed_demo(_open(store_dir))
        st.rerun()
    if refusal:
        st.caption(refusal)
    st.subheader("Retrievals recorded in traces")
    panel_trace()
    st.stop()
try:
    stream = _open(store_dir)
except Exception as e:  # a broken store must leave the rest of the app usable
    st.error(f"Cannot open the memory store at {store_dir!r}: {type(e).__name__}: {e}")
    st.stop()

frame = _memory_frame(stream)
counts = frame["type"].value_counts() if len(frame) else pd.Series(dtype=int)
m1, m2, m3, m4, m5 = st.columns([1, 1, 1, 1, 1.3])
m1.metric("Memories", len(frame), help="Everything stored in this memory stream.")
m2.metric("Observations", int(counts.get("observation", 0)), help="What the agent saw and did.")
m3.metric("Plans", int(counts.get("plan", 0)), help="Sage's plans (Q1-Q5 answers and action buffers).")
m4.metric("Reflections", int(counts.get("reflection", 0)), help="Conclusions drawn from other memories.")
with m5:
    if st.button("Reload from disk", key="mem_reload", help="Read the store again (another process may write it)."):
        stream.refresh(force=True)
        st.rerun()

if len(frame) == 0:
    st.info(f"The memory store at {stream.path} is empty. Run the agent with AMM on to fill it, or seed a small "
            "demo store of ScienceWorld memories (boiling water, growing a plant, testing conductivity).")
    if st.button("Seed demo store", key="mem_seed", type="primary", disabled=not share.unlocked()):
        with st.spinner("Embedding the demo memories..."):
            seed_demo(stream)
        st.rerun()
    st.subheader("Retrievals recorded in traces")
    panel_trace()
    st.stop()

tabs = st.tabs(["Memories", "Query", "From a trace", "Recency & importance", "Reflection tree", "Embedding map"])
with tabs[0]:
    panel_table(stream, frame)
with tabs[1]:
    panel_query(stream, frame)
with tabs[2]:
    panel_trace()
with tabs[3]:
    panel_recency_importance(stream, frame)
with tabs[4]:
    panel_tree(stream)
with tabs[5]:
    panel_projection(stream, frame)
