"""The Memory explorer's store and retrieval panels: the memory table, a query with its score breakdown, and the
retrievals an episode trace recorded (read with agent_core.trace, exactly as recorded)."""
from __future__ import annotations

import hashlib
import json
import zlib
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import streamlit as st

from agent_core.trace import TraceError, read_episode
from memory_store import MEMORY_TYPES, MemoryConfig, MemoryStream, RetrievalResult, open_stream
from memory_store.charts import breakdown_figure
from views import share, sources
from views.common import md_text
from views.memory_panels import plotly_safe
from views.stores import short_path

S = st.session_state


def open_store(path: str) -> MemoryStream:
    stream = open_stream(MemoryConfig(persist_dir=path))
    stream.refresh()  # the agent may have written since the last rerun (another process or reader)
    return stream


def memory_frame(stream: MemoryStream) -> pd.DataFrame:
    rows = [{"id": m.id, "type": m.type, "tag": m.tag, "description": m.description,
             "importance": m.importance, "created": m.created, "last access": m.last_access,
             "task": m.task, "episode": m.episode, "depth": m.depth, "evidence": ", ".join(m.evidence_ids),
             "importance note": m.importance_error, "importance source": m.importance_source,
             "variation": m.extra.get("variation"), "step": m.extra.get("step"), "reward": m.extra.get("reward")}
            for m in stream.memories()]
    return pd.DataFrame(rows, columns=["id", "type", "tag", "description", "importance", "created",
                                       "last access", "task", "episode", "depth", "evidence",
                                       "importance note", "importance source", "variation", "step", "reward"])


# ------------------------------------------------------------------ recorded retrievals

def _label(step: Any, j: int, trigger: Any, query: Any) -> str:
    return f"step {step} · #{j + 1} · {trigger} · {str(query)[:60]}"


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
        step = obj.get("step", where)
        return [(_label(step, j, res.get("trigger", "?"), res.get("query", "")), res)
                for j, r in enumerate(obj["retrievals"]) if (res := _result_of(r)) is not None]
    if _result_of(obj) is not None:
        return [(where, _result_of(obj))]
    return []


def _pasted_retrievals(raw: str, src: str) -> list[tuple[str, dict[str, Any]]]:
    """One JSON object, or JSON lines (a piece of a trace: no header needed)."""
    try:
        return _retrievals_from_obj(json.loads(raw), src)
    except json.JSONDecodeError:
        pass
    found, bad = [], 0
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            found += _retrievals_from_obj(json.loads(line), src)
        except json.JSONDecodeError:
            bad += 1
    if bad:
        st.warning(f"The {src} text has {bad} line(s) that did not parse; they were skipped.")
    return found


def _trace_retrievals(path: Path) -> list[tuple[str, RetrievalResult]]:
    """The retrievals a trace file recorded; lines that cannot be read are skipped and named."""
    try:
        ep = read_episode(path, tolerant=True)
    except (OSError, TraceError) as e:
        st.error(f"Cannot read {md_text(path)}: {md_text(e)}")
        return []
    bad = [p.line for p in ep.problems] + ([ep.truncated_tail[0]] if ep.truncated_tail else [])
    if bad:
        st.warning(f"Skipped {len(bad)} line(s) that did not parse (line {', '.join(map(str, bad[:10]))}"
                   f"{', ...' if len(bad) > 10 else ''}).")
    found = [(_label(rec.step, j, r.result.trigger, r.result.query), r.result)
             for rec in ep.steps for j, r in enumerate(rec.retrievals) if isinstance(r.result, RetrievalResult)]
    if not found:
        st.info("This trace records no retrievals.")
    return found


def parse_result(d: dict[str, Any] | RetrievalResult) -> RetrievalResult | None:
    if isinstance(d, RetrievalResult):
        return d
    try:
        return RetrievalResult.from_dict(d)
    except Exception as e:  # a malformed record is shown as a warning, never a crash
        st.warning(f"This retrieval record could not be read: {type(e).__name__}: {md_text(e)}")
        return None


def render_retrieval(result: RetrievalResult, key: str) -> None:
    """Stacked score chart of a retrieval, with weight sliders that re-rank it live."""
    # a recorded (or pasted) retrieval: its query, trigger, method and filters are not ours, so escaped
    st.markdown(f"**Query:** {md_text(repr(result.query))} · trigger **{md_text(result.trigger)}** · now = "
                f"{result.now:g} · top {md_text(result.k)} of {md_text(result.eligible)} eligible memories "
                f"({md_text(result.method)}, {md_text(result.examined)} scored, {result.elapsed_ms:.1f} ms)")
    if result.filters:
        st.caption(f"Filters: {md_text(result.filters)}")
    if not result.candidates:
        st.info("This retrieval found no memories." + (f" Error: {md_text(result.error)}" if result.error else ""))
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
    st.plotly_chart(breakdown_figure(plotly_safe(ranked), weights), key=f"{key}_chart")  # hover text is HTML
    table = pd.DataFrame([{
        "rank": c.rank, "recorded rank": original.get(c.id), "id": c.id, "type": c.type, "score": round(c.score, 4),
        "recency (n)": round(c.recency_n, 3), "importance (n)": round(c.importance_n, 3),
        "relevance (n)": round(c.relevance_n, 3), "recency": round(c.recency, 4), "importance": c.importance,
        "relevance": round(c.relevance, 4), "description": c.description} for c in ranked])
    table["recorded rank"] = table["recorded rank"].astype("Int64")  # blank, not NaN, for newcomers
    st.dataframe(table, hide_index=True, key=f"{key}_table")
    kept = (f"All {len(result.candidates)} scored candidates" if len(result.candidates) >= result.examined else
            f"The {len(result.candidates)} best of the {result.examined} scored memories")
    with st.expander(f"{kept} and the raw record"):
        st.caption(("Every memory that was scored" if len(result.candidates) >= result.examined else
                    f"The record keeps the {len(result.candidates)} best of the {result.examined} memories scored")
                   + " (best first under the recorded weights); the bounds are the min and max each score was "
                   "normalized with.")
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


UPLOAD_MB = 16  # the server refuses larger uploads too (server.maxUploadSize in .streamlit/config.toml)
MAX_PASTE = 2_000_000  # characters


def _parsed_once(src: str, key: str, text: Callable[[], str]) -> list[tuple[str, Any]]:
    """A pasted or uploaded text's retrievals, parsed once per content (every rerun of the page reuses them)."""
    cache = S.setdefault("mem_parsed", {})
    if cache.get(src, (None,))[0] != key:
        cache[src] = (key, _pasted_retrievals(text(), src))
    return cache[src][1]


def panel_trace() -> None:
    st.caption("What is this? Open a retrieval the agent recorded in an episode trace (or paste one) and see "
               "the scores it had at that step, exactly as recorded.")
    runs = sources.runs_dir()
    files = sorted({str(p) for d in (runs, sources.examples_dir()) if d.is_dir() for p in d.rglob("*.jsonl")})
    options = ["(none)"] + [short_path(p) for p in files]
    by_label = dict(zip(options[1:], files))
    choice = st.selectbox("Trace file", options, key="mem_trace_file",
                          help=f"Episode traces under {short_path(str(runs))} and assets/episodes/.")
    custom = st.text_input("...or a trace file path", key="mem_trace_path")
    path = Path(by_label[choice]) if choice != "(none)" else None
    if custom.strip():
        try:  # a shared app reads traces only under its own folders
            path = share.checked_path(custom, what="trace files")
        except share.PathRefused as e:
            st.error(str(e))
            path = None
    found: list[tuple[str, Any]] = _trace_retrievals(path) if path is not None else []
    pasted = st.text_area("...or paste a RetrievalResult JSON (or a step record with `retrievals`)",
                          key="mem_paste", height=100, max_chars=MAX_PASTE)
    upload = st.file_uploader(f"...or upload one (.json / .jsonl, at most {UPLOAD_MB} MB)", type=["json", "jsonl"],
                              key="mem_upload")
    if pasted.strip():
        found += _parsed_once("pasted", hashlib.sha256(pasted.encode()).hexdigest(), lambda: pasted)
    if upload is not None:
        if upload.size > UPLOAD_MB * 2**20:
            st.error(f"The file is {upload.size / 2**20:.1f} MB; this page reads at most {UPLOAD_MB} MB.")
        else:
            found += _parsed_once("uploaded", upload.file_id,
                                  lambda: upload.getvalue().decode("utf-8", "replace"))
    if not found:
        return
    labels = [f"{i + 1}. {lab}" for i, (lab, _) in enumerate(found)]
    pick = st.selectbox("Recorded retrieval", range(len(found)), format_func=lambda i: labels[i],
                        key="mem_trace_pick")
    result = parse_result(found[pick][1])
    if result is not None:
        render_retrieval(result, key=f"mem_t{zlib.crc32(labels[pick].encode())}")
