"""The Run page's Memory panel (AMM): what the agent wrote to its episodic memory at a step and what it
retrieved, with each retrieved memory's recency / importance / relevance, and the exact text injected
into Swift's input, Sage's prompt or the Critic's prompt. Rendered from step records only."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import streamlit as st

from agent_core.trace import EpisodeHeader, MemoryRetrieval, MemoryWrite, StepRecord
from memory_store import TAG_COLORS
from memory_store.charts import breakdown_figure
from views.common import chip, clip, code, episode_mechanisms, esc, html_text, md_code, md_text, record_at
from views.stores import resolve_store, short_path

WHAT_AMM = ("What is this? Episodic memory (AMM): after every step the agent keeps only the *salient* ones "
            "(a reward, a success, an action the game rejected) as short records. When Swift proposes an invalid "
            "action (T1) or Sage plans (T4) it retrieves the most useful records, scored by recency + importance "
            "+ relevance, and shows them to the model as hints. Memory never picks the action itself.")
TRIGGERS = {
    "T1": "Swift's action was invalid: records that worked, for one retry of Swift",
    "T2": "no progress for a while: retrieved and kept for the Critic, not shown to any model otherwise",
    "T3": "the same invalid action again: records to avoid, kept for the Critic",
    "T4": "Sage is planning: hints for its plan prompt",
    "critic": "evidence for the Critic, from the kept T2 / T3 records",
}
INJECTED = {"swift": "Swift's input (a memory field after the trained input)", "sage": "Sage's plan prompt",
            "critic": "the Critic's prompt"}


def amm_on(header: EpisodeHeader) -> bool:
    return "amm" in episode_mechanisms(header)


def tag_chip(tag: str) -> str:
    return chip(tag or "?", TAG_COLORS.get(tag, "#7f7f7f"))


def write_line(w: MemoryWrite) -> str:
    """One memory write, for markdown with unsafe_allow_html: every recorded word escaped (the id in <code>)."""
    if w.error:
        return f"{tag_chip(w.tag)} **not written**: {esc(w.error)}"
    return (f"{tag_chip(w.tag)} {code(w.id)} · importance {w.importance:g} ({esc(w.importance_source)}) · "
            f"{esc(w.why)}")


def retrieval_title(r: MemoryRetrieval) -> str:
    """One retrieval's title line (markdown, shown with unsafe_allow_html): the trigger and targets escaped too."""
    where = f" → injected into {esc(INJECTED.get(r.injected_into, r.injected_into))}" if r.injected_into else ""
    n = len(r.result.top) if r.result is not None else 0
    return f"**{esc(r.trigger)}** · {esc(r.why)} · {n} {'memory' if n == 1 else 'memories'} retrieved{where}"


def short_label(description: str) -> str:
    """What a record is about, in a few words: its action (AMM records) or its opening words."""
    if "ACTION: " in description:
        return description.split("ACTION: ", 1)[1].split(" | ", 1)[0]
    return description.split(" | ", 1)[0]


def _labels(r: MemoryRetrieval) -> list[str]:
    injected = set(r.injected_ids)
    return [f"{'▶ ' if c.id in injected else ''}{c.id} · {c.tag or c.type} · {clip(short_label(c.description), 34)}"
            for c in r.result.top]


def plotly_safe(candidates: list) -> list:
    """Copies of scored candidates whose id and description are HTML-escaped: breakdown_figure puts them in the
    bars' hover text and tick labels, which Plotly renders as HTML (<b>, <a href>, <span style>)."""
    return [dataclasses.replace(c, id=html_text(c.id), description=html_text(c.description)) for c in candidates]


@st.cache_resource(show_spinner=False, max_entries=512)
def _shared_bars(key_hash: int, _res, _labels: list[str]):
    """A recorded retrieval's score bars, built once per server for every browser that shows them."""
    return breakdown_figure(plotly_safe(_res.top), _res.weights, labels=[html_text(x) for x in _labels], title="",
                            bar_height=26)


def render_retrieval_card(r: MemoryRetrieval, key: str, *, explain: bool = True, store: str = "") -> None:
    st.markdown(retrieval_title(r), unsafe_allow_html=True)
    if explain:
        st.caption(TRIGGERS.get(r.trigger, ""))
    if r.error:
        st.warning(f"{md_text(r.error)}. The prompt stayed exactly as it would be without memory; the run went on.")
    if r.outcome:
        st.caption(md_text(r.outcome))
    res = r.result
    if res is not None and res.top:
        st.caption(f"Query: “{md_text(clip(res.query, 160))}” · {md_text(res.eligible)} eligible memories "
                   f"({md_text(', '.join(f'{k}={v}' for k, v in res.filters.items())) or 'no filter'}) · "
                   f"now = {res.now:g} · {res.elapsed_ms:.0f} ms. ▶ marks the records that were injected.")
        labels = _labels(r)
        key_hash = hash((res.query, res.now, tuple((c.id, c.score) for c in res.top), tuple(labels),
                         tuple(sorted(res.weights.items()))))
        fig = _shared_bars(key_hash, res, labels)
        st.plotly_chart(fig, key=f"{key}_bars", width="stretch", config={"displayModeBar": False})
    if r.injected_text:
        st.markdown("Injected text, exactly:")
        st.code(r.injected_text, language=None, wrap_lines=True)
    if explain and res is not None and res.top:
        st.button("Open in the Memory explorer", key=f"{key}_open", on_click=_open_in_explorer,
                  args=(store, res.to_dict(), f"{r.trigger} · {clip(res.query, 60)}"),
                  help="Opens this run's memory store in the Memory explorer with this retrieval selected "
                       "(re-rank it with other weights there).")


def _open_in_explorer(store: str, result: dict[str, Any], label: str) -> None:
    st.session_state["mem_open_request"] = {"store": store, "result": result, "label": label}


def follow_open_request() -> None:
    """Called by the page after its widgets: go to the Memory explorer if a button asked for it."""
    req = st.session_state.get("mem_open_request")
    if not req:
        return
    try:
        st.switch_page("pages/2_Memory.py")
    except Exception:  # the page runs on its own (no navigation): say where to go instead
        st.info("Open the **Memory explorer** page: this retrieval is selected there.")


def render_memory(header: EpisodeHeader, records: list[StepRecord], t: int) -> None:
    """The Memory panel at step t: writes (tag chips) and retrievals (score bars, injected text)."""
    if not amm_on(header):
        preset = header.config.get("preset", "?") if isinstance(header.config, dict) else "?"
        st.caption(f"Episodic memory (AMM) is not running in this preset (*{md_text(preset)}*); the +AMM and Full "
                   f"presets turn it on.")
        return
    st.markdown("**Episodic memory (AMM) at this step**")
    st.caption(WHAT_AMM)
    start = header.memory_at_start or {}
    if start.get("error"):
        st.error(f"The memory store could not be opened, so this run went on without memory: "
                 f"{md_text(start['error'])}")
    else:
        where = (f"Store {md_code(short_path(header.memory_store))}" if store_exists(header) else
                 f"The run's store ({md_code(Path(header.memory_store).name)}, not on this machine; every retrieval "
                 f"below is read from the trace)")
        st.caption(f"{where}: {md_text(start.get('memories', '?'))} memories when the episode started "
                   f"({md_text(start.get('seeded_from', ''))}); its clock continued from "
                   f"{md_text(start.get('clock', '?'))}.")
    rec = record_at(records, t)
    if rec is None:
        st.caption("Nothing yet: memory is written after a step and read when Swift fails or Sage plans.")
        return
    left, right = st.columns([1, 2])
    with left, st.container(border=True):
        st.markdown("**Written**")
        if rec.memories_written:
            for w in rec.memories_written:
                st.markdown(write_line(w), unsafe_allow_html=True)
                with st.expander("The stored record"):
                    st.text(w.text)
        else:
            st.caption("Nothing: this step was not salient (no reward, no rejected action, the episode went on).")
    with right, st.container(border=True):
        st.markdown("**Retrieved**")
        if not rec.retrievals:
            st.caption("No retrieval at this step: Swift's action was valid and Sage did not plan.")
        for i, r in enumerate(rec.retrievals):
            with st.container(border=True):
                render_retrieval_card(r, key=f"run_mem_{t}_{i}", store=header.memory_store)
    totals = memory_totals(records[:t])
    st.caption("So far in this episode: " + (md_text(", ".join(f"{k} {v}" for k, v in totals.items())) or "nothing"))


def memory_totals(records: list[StepRecord]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        for w in r.memories_written:
            if not w.error:
                out[f"written {w.tag}"] = out.get(f"written {w.tag}", 0) + 1
        for x in r.retrievals:
            out[x.trigger] = out.get(x.trigger, 0) + 1
    return out


def render_memory_detail(header: EpisodeHeader, rec: StepRecord) -> None:
    """Compact, inside one step of the step list."""
    if not amm_on(header):
        return
    for w in rec.memories_written:
        st.markdown("Memory " + write_line(w), unsafe_allow_html=True)
    for i, r in enumerate(rec.retrievals):
        st.markdown(retrieval_title(r), unsafe_allow_html=True)
        if r.error:
            st.caption(md_text(r.error))
        elif r.injected_text:
            st.code(r.injected_text, language=None, wrap_lines=True)


def store_exists(header: EpisodeHeader) -> bool:
    try:
        return bool(header.memory_store) and (resolve_store(header.memory_store) / "chroma.sqlite3").exists()
    except (OSError, ValueError):  # a recorded path no file can have (too long, a NUL): not on this machine
        return False
