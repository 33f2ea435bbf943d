"""The Memory explorer page, run for real with Streamlit's AppTest on a real store."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from memory_store import MemoryConfig, RetrievalResult, open_stream, seed_demo

pytestmark = [pytest.mark.page, pytest.mark.model, pytest.mark.xdist_group("test_memory_page")]

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "2_Memory.py")
FIXTURE = ROOT / "tests" / "fixtures" / "memory_trace.jsonl"
TIMEOUT = 120  # the first run loads the embedding model


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("page_store"))
    seed_demo(open_stream(MemoryConfig(persist_dir=path)))
    return path


def _page(monkeypatch, store: str) -> AppTest:
    monkeypatch.setenv("SWIFTSAGE_MEMORY_DIR", store)
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(Path(store).parent / "no-runs"))  # no run store overrides it
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    return at


TABS = {"mem_table": 0, "query": 1, "trace": 2}


def _table(at: AppTest, panel: str):
    """The first table of a tab: the memory list, or the ranked retrieval of the query/trace tab."""
    return at.tabs[TABS[panel]].dataframe[0].value


def test_a_path_without_a_store_is_not_created(monkeypatch, tmp_path):
    at = _page(monkeypatch, str(tmp_path / "nothing-here"))
    assert any("There is no memory store at" in w.value for w in at.warning)
    assert not (tmp_path / "nothing-here").exists()  # no Chroma database appeared there
    at.button(key="mem_seed_new").click().run()  # only an explicit click creates one
    assert not at.exception, at.exception
    assert int(at.metric[0].value) >= 40
    assert _table(at, "mem_table").shape[0] == int(at.metric[0].value)
    assert all(cap.value for cap in at.caption)  # every panel explains itself


def test_empty_store_offers_the_demo_seed(monkeypatch, tmp_path):
    open_stream(MemoryConfig(persist_dir=str(tmp_path / "empty")))  # a real, empty store
    at = _page(monkeypatch, str(tmp_path / "empty"))
    assert "empty" in at.info[0].value
    at.button(key="mem_seed").click().run()
    assert not at.exception, at.exception
    assert at.metric[0].value == str(len(open_stream(MemoryConfig(persist_dir=str(tmp_path / "empty")))))


def test_default_store_is_the_latest_run_store(monkeypatch, tmp_path, demo_dir):
    runs = tmp_path / "runs"
    runs.mkdir()
    header = json.loads(FIXTURE.read_text().splitlines()[0])
    header["memory_store"] = demo_dir
    (runs / "latest.jsonl").write_text(json.dumps(header) + "\n")
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(runs))
    monkeypatch.delenv("SWIFTSAGE_MEMORY_DIR", raising=False)
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception
    assert at.text_input(key="mem_dir").value == demo_dir
    assert any("latest run that used memory" in c.value for c in at.caption)
    # the trace list reads SWIFTSAGE_RUNS_DIR
    assert any("latest.jsonl" in o for o in at.selectbox(key="mem_trace_file").options)


def test_opened_from_the_run_page(monkeypatch, demo_dir):
    rec = [json.loads(x) for x in FIXTURE.read_text().splitlines() if '"T4"' in x][0]
    result = next(r["result"] for r in rec["retrievals"] if r["trigger"] == "T4")
    monkeypatch.setenv("SWIFTSAGE_MEMORY_DIR", "/nonexistent")
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", "/nonexistent-runs")
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.session_state["mem_open_request"] = {"store": demo_dir, "result": result, "label": "T4 · step 6"}
    at.run()
    assert not at.exception, at.exception
    assert at.text_input(key="mem_dir").value == demo_dir
    assert any("Retrieval opened from the Run page" in m.value for m in at.markdown)
    table = at.dataframe[0].value
    assert list(table["id"]) == result["top_ids"][: len(table)]


def test_opened_from_a_run_whose_store_is_not_on_this_machine(monkeypatch, demo_dir):
    """A shipped example recorded its store under /tmp on another machine: the retrieval opens from the trace,
    the page says so in words, and no warning about a missing path greets the student."""
    rec = [json.loads(x) for x in FIXTURE.read_text().splitlines() if '"T4"' in x][0]
    result = next(r["result"] for r in rec["retrievals"] if r["trigger"] == "T4")
    monkeypatch.setenv("SWIFTSAGE_MEMORY_DIR", demo_dir)
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", "/nonexistent-runs")
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT)
    at.session_state["mem_open_request"] = {"store": "/tmp/tmpgone123/memory", "result": result, "label": "T4"}
    at.run()
    assert not at.exception, at.exception
    assert at.text_input(key="mem_dir").value == demo_dir  # the default store, not the missing path
    assert not any("There is no memory store" in w.value for w in at.warning)
    assert any("`memory`) that is not on this machine" in c.value for c in at.caption)
    assert list(at.dataframe[0].value["id"]) == result["top_ids"][: len(at.dataframe[0].value)]


def test_filters_query_chart_and_sliders_rerank(monkeypatch, demo_dir):
    at = _page(monkeypatch, demo_dir)
    total = _table(at, "mem_table").shape[0]
    at.multiselect(key="mem_f_type").set_value(["reflection"]).run()
    table = _table(at, "mem_table")
    assert 0 < len(table) < total and set(table["type"]) == {"reflection"}

    before = len(at.tabs[1].get("plotly_chart"))
    stream = open_stream(MemoryConfig(persist_dir=demo_dir))
    access_before = [m.last_access for m in stream.memories()]
    at.text_input(key="mem_query").input("how do I boil water in a pot").run()
    at.button(key="mem_retrieve").click().run()
    assert not at.exception, at.exception
    assert len(at.tabs[1].get("plotly_chart")) == before + 1  # the score breakdown chart
    result = RetrievalResult.from_dict(at.session_state["mem_result"])
    shown = _table(at, "query")
    assert list(shown["id"]) == result.top_ids
    assert list(shown["score"]) == [round(c.score, 4) for c in result.top]
    spec = json.loads(at.tabs[1].get("plotly_chart")[0].proto.spec)
    assert [t["name"].split(" ")[0] for t in spec["data"]] == ["recency", "importance", "relevance"]
    assert spec["layout"]["barmode"] == "stack"
    # exploring does not touch the agent's memory unless asked
    assert [m.last_access for m in stream.memories()] == access_before

    # importance only: the order must become the one computed from the recorded breakdown
    at.slider(key="mem_q1_w_recency").set_value(0.0)
    at.slider(key="mem_q1_w_relevance").set_value(0.0).run()
    expected = result.rerank({"recency": 0.0, "importance": 1.0, "relevance": 0.0})
    reranked = _table(at, "query")
    assert list(reranked["id"]) == [c.id for c in expected]
    assert list(reranked["id"]) != result.top_ids
    assert list(reranked["importance"]) == sorted(reranked["importance"], reverse=True)


def test_open_a_retrieval_recorded_in_a_trace(monkeypatch, demo_dir, tmp_path):
    """The fixture is a real `amm` trace (tests/test_amm.py records the same kind); the page shows each
    retrieval's scores exactly as recorded."""
    from agent_core.trace import read_episode

    ep = read_episode(FIXTURE)  # a valid trace
    recorded = [x.result for r in ep.steps for x in r.retrievals if x.result is not None]
    at = _page(monkeypatch, demo_dir)
    at.text_input(key="mem_trace_path").input(str(FIXTURE)).run()
    assert not at.exception, at.exception
    assert not any("did not parse" in w.value for w in at.warning)
    pick = at.selectbox(key="mem_trace_pick")
    assert len(pick.options) == len(recorded)
    assert any("T4" in o for o in pick.options) and any("T1" in o for o in pick.options)
    table = _table(at, "trace")
    # the scores it had at that step, not recomputed
    assert list(table["id"]) == recorded[0].top_ids[: len(table)]
    assert list(table["score"]) == [round(c.score, 4) for c in recorded[0].top][: len(table)]
    t1 = next(i for i, o in enumerate(pick.options) if "T1" in o)
    at.selectbox(key="mem_trace_pick").set_value(t1).run()
    assert list(_table(at, "trace")["id"]) == recorded[t1].top_ids[: len(_table(at, "trace"))]

    # a corrupted line is skipped and reported, the rest still shows
    broken = tmp_path / "broken.jsonl"
    lines = FIXTURE.read_text().splitlines()
    broken.write_text("\n".join(lines[:3] + ['{"kind": "step", "step": 3, "retr'] + lines[3:]) + "\n")
    at.text_input(key="mem_trace_path").input(str(broken)).run()
    assert any("did not parse" in w.value for w in at.warning)
    assert len(at.selectbox(key="mem_trace_pick").options) == len(recorded)

    # paste a RetrievalResult JSON instead
    at.text_input(key="mem_trace_path").input("").run()
    at.text_area(key="mem_paste").input(json.dumps(recorded[1].to_dict())).run()
    assert not at.exception, at.exception
    assert len(at.selectbox(key="mem_trace_pick").options) == 1


def test_reflection_tree_links_are_clickable(monkeypatch, demo_dir):
    at = _page(monkeypatch, demo_dir)
    stream = open_stream(MemoryConfig(persist_dir=demo_dir))
    deepest = max((m for m in stream.memories() if m.type == "reflection"), key=lambda m: m.depth)
    at.selectbox(key="mem_tree_pick").set_value(deepest.id).run()
    assert any(deepest.description in md.value for md in at.markdown)
    child = deepest.evidence_ids[0]
    at.button(key=f"mem_ev_{deepest.id}_{child}").click().run()
    assert not at.exception, at.exception
    assert at.session_state["mem_focus"] == child
    assert any(stream.get(child).description in md.value for md in at.markdown)
    # and back up through "cited by"
    at.button(key=f"mem_par_{child}_{deepest.id}").click().run()
    assert at.session_state["mem_focus"] == deepest.id
