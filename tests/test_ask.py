"""Ask the agent: a question retrieves memories with their recency / importance / relevance breakdown, the LLM
answers from them and its citations are mapped to memory ids (memory_store/interview.py); a recorded episode
becomes a memory stream (views/ask.py); the page shows the memories before the answer (pages/6_Ask.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from agent_core.trace import read_episode
from memory_store import MemoryConfig, MemoryStream
from memory_store.interview import answer_question, parse_citations, retrieve_for_question, top_candidates
from views.ask import episode_memories, episode_stream, suggested_questions

pytestmark = pytest.mark.xdist_group("test_ask")

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "assets" / "episodes" / "inclined-plane-friction-named-surfaces-v1038-full.jsonl"
IDS = ["m000004", "m000009", "m000001"]


@pytest.mark.parametrize("raw, text, cited, bad", [
    ("I went there because of the plan [2].", "I went there because of the plan [m000009].", ["m000009"], []),
    ("Two reasons [1, 3] and again [3].", "Two reasons [m000004, m000001] and again [m000001].", ["m000004", "m000001"], []),
    ("See [1 and 2].", "See [m000004, m000009].", ["m000004", "m000009"], []),
    ("A made-up one [7] and a real one [1].", "A made-up one [?7] and a real one [m000004].", ["m000004"], [7]),
    ("Just prose, no memory named.", "Just prose, no memory named.", [], []),
    ("  [0] nothing  ", "[?0] nothing", [], [0]),
])
def test_citations_on_messy_outputs(raw, text, cited, bad):
    assert parse_citations(raw, IDS) == (text, cited, bad)


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    import os

    runs = tmp_path_factory.mktemp("runs")
    old = os.environ.get("SWIFTSAGE_RUNS_DIR")
    os.environ["SWIFTSAGE_RUNS_DIR"] = str(runs)
    ep = read_episode(FULL)
    try:
        yield ep, episode_stream(FULL, ep.header, ep.steps), runs
    finally:
        if old is None:
            os.environ.pop("SWIFTSAGE_RUNS_DIR")
        else:
            os.environ["SWIFTSAGE_RUNS_DIR"] = old


@pytest.mark.model
def test_an_episode_becomes_a_memory_stream(episode):
    ep, stream, runs = episode
    items = episode_memories(ep.header, ep.steps)
    steps = [i for i in items if i["type"] == "observation"]
    assert len(steps) == len(ep.steps) and len(stream) == len(items)
    assert [i["now"] for i in steps] == [float(r.step) for r in ep.steps]
    first = steps[0]["description"]
    assert first.startswith(f"Step 1, in the {ep.steps[0].room}: I did '{ep.steps[0].action}'. Why: Swift")
    # a step that earned points keeps the importance the agent's AMM gave it; a plain move is mundane
    gain = next(i for i, r in zip(steps, ep.steps) if r.reward > 0)
    dull = next(i for i, r in zip(steps, ep.steps) if r.reward == 0 and r.system == "swift")
    assert gain["importance"] == ep.steps[0].memories_written[0].importance > dull["importance"] == 2.0
    assert gain["extra"]["importance_from"] == "the agent's own memory (AMM)"
    # a Baseline run stored nothing: the salience gate's rule rates the same step
    base = read_episode(str(FULL).replace("-full.jsonl", "-baseline.jsonl"))
    b_steps = [i for i in episode_memories(base.header, base.steps) if i["type"] == "observation"]
    b_gain = next(i for i, r in zip(b_steps, base.steps) if r.reward > 0)
    assert b_gain["importance"] > 2.0 and b_gain["extra"]["importance_from"].startswith("salience rule")
    plans = [i for i in items if i["type"] == "plan"]
    assert plans and all(p["description"].startswith("My plan at step") for p in plans)
    # reopened, not rewritten
    again = episode_stream(FULL, ep.header, ep.steps)
    assert len(again) == len(items) and [m.id for m in again.memories()] == [m.id for m in stream.memories()]
    assert str(runs) in again.path


@pytest.mark.model
def test_retrieval_for_a_question_finds_the_step_and_leaves_memory_untouched(episode):
    ep, stream, _ = episode
    focus = next(r for r in ep.steps if r.action.startswith("focus on"))
    before = {m.id: m.last_access for m in stream.memories()}
    result = retrieve_for_question(stream, f"Why did you {focus.action}?", k=5)
    top = top_candidates(result)
    assert len(top) == 5 and result.trigger == "user"
    hit = next(c for c in top if c.description.startswith(f"Step {focus.step},"))
    assert hit.relevance_n == max(c.relevance_n for c in result.candidates)
    assert all(0 <= x <= 1 for c in top for x in (c.recency_n, c.importance_n, c.relevance_n))
    assert {m.id: m.last_access for m in stream.memories()} == before
    qs = suggested_questions(ep.header, ep.steps)
    assert f"Why did you {focus.action}?" in qs and len(qs) <= 4


@pytest.mark.model
def test_answer_cites_ids_and_failures_are_recorded(episode):
    _ep, stream, _ = episode
    result = retrieve_for_question(stream, "what did you do with the block?", k=3)
    ids = [c.id for c in top_candidates(result)]
    seen: list[str] = []

    def fake(prompt: str) -> str:
        seen.append(prompt)
        return "I moved the block [2]. Then I timed it [3].\nStudent: and then?\nYou: nothing"

    ans = answer_question("what did you do with the block?", result, fake, model="scripted")
    memories = seen[0].split("Your memories:")[1]
    assert "[1] " in memories and "[3] " in memories and "[4] " not in memories
    assert ans.text == f"I moved the block [{ids[1]}]. Then I timed it [{ids[2]}]." and ans.cited == ids[1:]

    def broken(prompt: str) -> str:
        raise ConnectionError("server gone")

    bad = answer_question("q", result, broken)
    assert bad.error == "ConnectionError: server gone" and bad.text == "" and bad.memory_ids == ids
    empty = MemoryStream(MemoryConfig(), path=_tmp(stream))
    none = answer_question("q", retrieve_for_question(empty, "q"), fake)
    assert none.memory_ids == [] and "no memories" in none.text and len(seen) == 1  # no model call


def _tmp(stream) -> str:
    return str(Path(stream.path).parent / "empty-store")


def _page(tmp_path, monkeypatch) -> AppTest:
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(tmp_path / "runs"))
    at = AppTest.from_file(str(ROOT / "pages" / "6_Ask.py"), default_timeout=300)
    at.query_params["trace"] = str(FULL.relative_to(ROOT))
    at.session_state["ask_emb"] = "smollm2-135m"  # the real embedded model, the fast one
    return at


@pytest.mark.model
@pytest.mark.page
def test_page_answers_with_the_real_embedded_model_after_showing_the_memories(tmp_path, monkeypatch):
    at = _page(tmp_path, monkeypatch)
    at.run()
    assert not at.exception and not at.error
    assert any("inclined-plane-friction-named-surfaces v1038 · full" in c.value for c in at.caption)
    suggestions = [b for b in at.button if b.key and b.key.startswith("ask_suggest_")]
    assert len(suggestions) >= 3
    focus_q = next(b for b in suggestions if b.label.startswith("Why did you focus on"))
    focus_q.click()
    at.run()
    assert not at.exception
    (h,) = at.session_state["ask_history"]
    assert h["question"] == focus_q.label and h["answer"]["model"] == "smollm2-135m"
    assert h["answer"]["error"] is None and h["answer"]["raw"].strip()
    memories = h["answer"]["prompt"].split("Your memories:")[1]
    assert len(h["answer"]["memory_ids"]) == 5 and memories.count("\n[") == 5
    # the retrieved memories (chart + table with the three scores) come before the answer in the page
    table = at.dataframe[0].value
    assert list(table.columns[:9]) == ["#", "memory", "cited", "type", "score", "recency", "importance", "relevance",
                                       "won on"]
    assert list(table["memory"]) == h["answer"]["memory_ids"]
    # a typed question goes under the first one; the conversation stays
    at.chat_input(key="ask_input").set_value("what do you know about friction?")
    at.run()
    assert [x["question"] for x in at.session_state["ask_history"]] == [focus_q.label, "what do you know about friction?"]
    assert len(at.dataframe) == 2


@pytest.mark.model
@pytest.mark.page
def test_page_unreachable_server_shows_the_memories_and_a_clear_error(tmp_path, monkeypatch):
    at = _page(tmp_path, monkeypatch)
    at.session_state["ask_backend"] = "openai"
    at.session_state["ask_url"] = "http://127.0.0.1:9/v1"  # nothing listens there
    at.run()
    at.chat_input(key="ask_input").set_value("why did you go to the hallway?")
    at.run()
    assert not at.exception
    assert at.dataframe and len(at.dataframe[0].value) == 5
    assert any("The model could not answer" in e.value for e in at.error)
    assert at.session_state["ask_history"][0]["answer"]["error"]


@pytest.mark.model
@pytest.mark.page
def test_page_refuses_a_link_outside_the_trace_folders(tmp_path, monkeypatch):
    at = _page(tmp_path, monkeypatch)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(FULL.read_text())
    at.query_params["trace"] = str(outside)
    at.run()
    assert not at.exception
    assert str(outside) not in at.selectbox(key="ask_trace").options  # an example is opened instead
