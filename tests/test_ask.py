"""Ask the agent: a question retrieves memories with their recency / importance / relevance breakdown, the LLM
answers from them and its citations are mapped to memory ids (memory_store/interview.py); a recorded episode
becomes a memory stream (views/ask.py); the page shows the memories before the answer (pages/6_Ask.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from agent_core.trace import read_episode
from memory_store import MemoryConfig, MemoryStream
from memory_store.interview import (answer_question, check_support, interview_prompt, parse_citations, phrase_facts,
                                    retrieve_for_question, top_candidates)
from views.ask import episode_memories, episode_stream, step_memory_ids, suggested_questions
from views.ask_records import answer_from_records

pytestmark = pytest.mark.xdist_group("test_ask")

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "assets" / "episodes" / "inclined-plane-friction-named-surfaces-v1038-full.jsonl"
AMM = ROOT / "assets" / "episodes" / "inclined-plane-friction-named-surfaces-v1038-amm.jsonl"  # ends on a focus
BOIL = ROOT / "assets" / "evaluations" / "cpu-30x2x30" / "traces" / "baseline" / "boil-v21-baseline.jsonl"
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
    ep = read_episode(AMM)
    try:
        yield ep, episode_stream(ep.header, ep.steps), runs
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
    base = read_episode(str(AMM).replace("-amm.jsonl", "-baseline.jsonl"))
    b_steps = [i for i in episode_memories(base.header, base.steps) if i["type"] == "observation"]
    b_gain = next(i for i, r in zip(b_steps, base.steps) if r.reward > 0)
    assert b_gain["importance"] > 2.0 and b_gain["extra"]["importance_from"].startswith("salience rule")
    plans = [i for i in items if i["type"] == "plan"]
    assert plans and all(p["description"].startswith("My plan at step") for p in plans)
    # reopened, not rewritten
    again = episode_stream(ep.header, ep.steps)
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
    # among the most relevant (other steps about the same `inclined plane in inventory` come close)
    assert hit.relevance_n >= sorted(c.relevance_n for c in result.candidates)[-3]
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
    assert "kitchen" not in seen[0] and "Example" not in seen[0]  # no example answer a question could match
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
    at.query_params["trace"] = str(AMM.relative_to(ROOT))
    at.session_state["ask_emb"] = "smollm2-135m"  # the real embedded model, the fast one
    return at


@pytest.mark.model
@pytest.mark.page
def test_page_answers_with_the_real_embedded_model_after_showing_the_memories(tmp_path, monkeypatch):
    at = _page(tmp_path, monkeypatch)
    at.run()
    assert not at.exception and not at.error
    assert any("inclined-plane-friction-named-surfaces v1038 · amm" in c.value for c in at.caption)
    suggestions = [b for b in at.button if b.key and b.key.startswith("ask_suggest_")]
    assert len(suggestions) >= 3
    focus_q = next(b for b in suggestions if b.label.startswith("Why did you focus on"))
    focus_q.click()
    at.run()
    assert not at.exception
    # the records answer this one exactly: the focus step's memory is cited and the model only phrases it
    (h,) = at.session_state["ask_history"]
    focus_step = next(r.step for r in read_episode(AMM).steps if r.action.startswith("focus on"))
    assert h["question"] == focus_q.label and h["retrieval"] is None and h["answer"]["grounding"] == "records"
    assert [c["step"] for c in h["records"]] == [focus_step] and h["answer"]["cited"] == [h["records"][0]["memory"]]
    assert h["answer"]["model"] == "smollm2-135m" and h["answer"]["raw"].strip()  # the model was asked to phrase it
    assert any(c.value.startswith("Exact: built from the step records") for c in at.caption)
    # a question the records do not answer: memories first (chart + table with the three scores), then the answer
    at.chat_input(key="ask_input").set_value("what do you know about friction?")
    at.run()
    assert not at.exception
    assert [x["question"] for x in at.session_state["ask_history"]] == [focus_q.label, "what do you know about friction?"]
    h = at.session_state["ask_history"][1]
    assert h["answer"]["grounding"] == "memories" and h["answer"]["error"] is None and h["answer"]["raw"].strip()
    memories = h["answer"]["prompt"].split("Your memories:")[1]
    assert len(h["answer"]["memory_ids"]) == 5 and memories.count("\n[") == 5
    table = at.dataframe[1].value
    assert list(table.columns[:9]) == ["#", "memory", "cited", "type", "score", "recency", "importance", "relevance",
                                       "won on"]
    assert list(table["memory"]) == h["answer"]["memory_ids"]
    # the table marks what the newest answer cites on the same run, not on the next one
    assert [m for m, c in zip(table["memory"], table["cited"]) if c] == \
        [m for m in h["answer"]["memory_ids"] if m in h["answer"]["cited"]]
    assert len(h["answer"]["support"]) >= 1 and len(at.dataframe) == 2


@pytest.mark.model
@pytest.mark.page
def test_each_visitor_asks_with_their_own_prompt_cache_on_the_shared_model(tmp_path, monkeypatch):
    """Two visitors of one app share the loaded model (one backend per server); another visitor's question in
    between must not be read over this visitor's cache, nor theirs over this one's (its answer would then depend
    on who asked before)."""
    q = "what do you know about friction?"
    one, two = _page(tmp_path, monkeypatch), _page(tmp_path, monkeypatch)
    for at in (one, two, one):
        at.run()
        at.chat_input(key="ask_input").set_value(q)
        at.run()
        assert not at.exception
    (shared_one, _), = one.session_state["ask_llm_views"].values()
    (shared_two, _), = two.session_state["ask_llm_views"].values()
    assert shared_one is shared_two  # the same loaded backend: the case where their caches could mix
    first, again = (h["answer"] for h in one.session_state["ask_history"])
    (other,) = (h["answer"] for h in two.session_state["ask_history"])
    assert first["cache"] == "empty" and other["cache"] == "empty"  # each began on a cache of its own
    assert again["cache"] == "restored"  # the other visitor's call came between; this one's cache was given back
    assert other["raw"] == first["raw"]  # the same prompt on an empty cache: the same answer, whoever asked first


@pytest.mark.model
@pytest.mark.page
def test_page_unreachable_server_shows_the_memories_and_a_clear_error(tmp_path, monkeypatch):
    at = _page(tmp_path, monkeypatch)
    at.session_state["ask_backend"] = "openai"
    at.session_state["ask_url"] = "http://127.0.0.1:9/v1"  # nothing listens there
    at.run()
    at.chat_input(key="ask_input").set_value("what do you know about friction?")
    at.run()
    assert not at.exception
    assert at.dataframe and len(at.dataframe[0].value) == 5
    assert any("The model could not answer" in e.value for e in at.error)
    assert at.session_state["ask_history"][0]["answer"]["error"]
    # an exact answer does not need the model: the records' own words, and why they were not phrased
    at.chat_input(key="ask_input").set_value("why did you go to the hallway?")
    at.run()
    ans = at.session_state["ask_history"][1]["answer"]
    assert ans["error"] is None and ans["grounding"] == "records" and "could not phrase" in ans["phrasing"]


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


BOIL_STEP = ("Step 3, in the hallway: I did 'go to kitchen'. Why: Swift chose 'go to kitchen', its most likely valid "
             "action. The game said: \"You move to the kitchen.\" The score stayed at 0.")


@pytest.mark.parametrize("line, supported, missing", [
    # the 1.5B model's copy of the old prompt's example, on a boil-lead episode: water and the sink are its own
    ("[m000003] I went to the kitchen because the task needed water and the sink is there.", False,
     ["task", "water", "sink"]),
    ("[m000003] I went to the kitchen because Swift chose it as its most likely valid action.", True, []),
    ("[m000003] That move earned 5 points.", False, ["earn", "5", "point"]),  # a number the memory does not hold
    ("I am sure it was the right call.", False, ["sure", "right", "call"]),  # cites nothing
    ("[m000003] I did it.", True, []),  # claims nothing beyond the memory
])
def test_an_answer_line_is_checked_against_the_memory_it_cites(line, supported, missing):
    (s,) = check_support(line, {"m000003": BOIL_STEP})
    assert s.supported is supported and s.missing == missing
    assert s.describe().startswith("supported by m000003" if supported else
                                   ("not supported by m000003" if s.cited else "cites no memory"))


def test_questions_the_records_answer_exactly():
    ep = read_episode(FULL)
    sage = next(r for r in ep.steps if r.trigger is not None and r.system == "sage")
    a = answer_from_records(f"Why did Sage take over at step {sage.step}?", ep.header, ep.steps, ep.summary)
    assert a.kind == "step" and a.steps == [sage.step] and a.text.startswith(f"At step {sage.step} Sage acted")
    assert f"'{sage.action}'" in a.text and sage.action in a.keep() and str(sage.step) in a.keep()
    swift = next(r for r in ep.steps if r.system == "swift")
    a = answer_from_records(f"who acted at step {swift.step} and why", ep.header, ep.steps)
    assert a.text.startswith(f"At step {swift.step} Swift acted, playing '{swift.action}': Swift")
    assert answer_from_records("what happened at step 999?", ep.header, ep.steps).text == \
        f"This episode has {len(ep.steps)} steps, so there is no step 999."
    drops = [(r.step, g) for r in ep.steps for g in r.gate1 if g.decision == "DROP"]
    a = answer_from_records("What did Gate-1 drop?", ep.header, ep.steps)
    assert a.kind == "gate1" and (f"dropped {len(drops)} action(s)" in a.text if drops else "dropped none" in a.text)
    base = read_episode(str(FULL).replace("-full.jsonl", "-baseline.jsonl"))
    assert "not on in this episode" in answer_from_records("what did gate-1 drop at step 2?", base.header,
                                                           base.steps).text
    assert "without episodic memory" in answer_from_records("Which memory won at step 3?", base.header,
                                                            base.steps).text
    injected = next(r for r in ep.steps for x in r.retrievals if x.injected_ids and not x.error)  # Full uses T1/T4
    a = answer_from_records(f"Which memory won at step {injected.step}?", ep.header, ep.steps)
    x = next(x for x in injected.retrievals if x.injected_ids and not x.error)
    assert a.kind == "memory" and x.injected_ids[0] in a.text
    a = answer_from_records("When did Sage take over?", ep.header, ep.steps)
    called = [r.step for r in ep.steps if r.trigger is not None and r.trigger.name in
              ("invalid", "critical", "stuck", "unexpected", "gate1_drops")]
    assert a.kind == "sage" and a.text.startswith(f"Sage was asked {len(called)} time(s), at step(s) {called[0]}")
    focus = next(r for r in read_episode(AMM).steps if r.action.startswith("focus on"))  # Full never focuses
    a = answer_from_records(f"Why did you {focus.action}?", ep.header, ep.steps)
    assert a is None or not a.steps  # never played in Full: no step is claimed (the memories answer it)
    amm = read_episode(AMM)
    a = answer_from_records(f"Why did you {focus.action}?", amm.header, amm.steps)
    assert a.kind == "action" and a.steps == [focus.step] and f"step {focus.step}" in a.text
    assert answer_from_records("Why did you go to the kitchen?", ep.header, ep.steps).text.startswith(
        "I never went to the kitchen in this episode")
    assert answer_from_records("How did the episode end?", ep.header, ep.steps, ep.summary).text.endswith(
        f"the final score was {ep.summary.final_score:g}.")
    assert answer_from_records("What did you learn about friction?", ep.header, ep.steps) is None
    # wordings the records cannot settle go to the memories, never to a false "I never ..."
    went = next(r for r in ep.steps if r.action.startswith("go to"))
    room = went.action.removeprefix("go to ")
    first = answer_from_records(f"Why did you go to the {room} first?", ep.header, ep.steps)
    assert first.kind == "action" and first.steps == [went.step]
    assert answer_from_records("Why did you take so long?", ep.header, ep.steps) is None
    assert answer_from_records("Why did you drop the block?", ep.header, ep.steps) is None  # not a Gate-1 question
    assert answer_from_records("Why did the score drop?", ep.header, ep.steps) is None
    long = next(r for r in ep.steps if len(r.action.split()) >= 6)  # "move block to inclined plane with a ..."
    words = long.action.split()
    loose = " ".join(words[:2] + words[-2:])  # "move block platinum surface": the words a student might use
    got = answer_from_records(f"Why did you {loose}?", ep.header, ep.steps)
    assert got.kind == "action" and f"'{long.action}'" in got.text


def test_a_phrasing_that_loses_or_adds_a_fact_is_not_shown():
    from views.ask_records import RecordAnswer

    exact = RecordAnswer("step", "At step 4 I did 'move block to inclined plane a'. It earned +10 points (now 40).", [4])
    assert exact.keep() == ["+10", "4", "40", "move block to inclined plane a"]
    assert RecordAnswer("gate1", "Gate-1 dropped nothing at step 2.").keep() == ["2", "nothing"]  # not Gate-1's 1
    # a "never" answer keeps its negation and its room: "I was in the hallway" is not a phrasing of it
    never = RecordAnswer("action", "I never went to the bathroom in this episode: the rooms I was in were hallway.",
                         must=["bathroom"])
    assert never.keep() == ["bathroom", "never"]
    wrong = phrase_facts("q", never.text, never.keep(), [], lambda p: "I was in the hallway.", model="scripted")
    assert wrong.text == never.text and "lost" in wrong.phrasing

    def phrase(said: str):
        return phrase_facts("q", exact.text, exact.keep(), ["m000003"], lambda p: said, model="scripted")

    good = phrase("At step 4 I did 'move block to inclined plane a', which earned +10 points (now 40).")
    assert good.text.endswith("[m000003]") and good.phrasing == "phrased by scripted" and good.grounding == "records"
    lost = phrase("I moved the block and got points.")
    assert lost.text == exact.text + " [m000003]" and "lost" in lost.phrasing and lost.raw
    # whole words only: "step 14" does not keep step 4
    assert "lost" in phrase("At step 14 I did move block to inclined plane a: +10 points, now 40.").phrasing
    added = phrase("At step 4 I did move block to inclined plane a to measure friction with the stopwatch, "
                   "+10 points, now 40.")
    assert "added" in added.phrasing and added.text == exact.text + " [m000003]"
    assert phrase_facts("q", exact.text, [], [], None).text == exact.text and not interview_prompt("q", []).count(
        "Example")


@pytest.mark.model
def test_the_kitchen_question_on_a_boil_episode_with_the_real_smollm2(tmp_path, monkeypatch):
    """The old prompt's example ("the task needed water and the sink is there") was copied as the answer; now
    the records answer it, and the model's answer from memories carries no example to copy."""
    from agent_core.config import LLMConfig
    from agent_core.llm import make_backend

    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(tmp_path / "runs"))
    ep = read_episode(BOIL)
    stream = episode_stream(ep.header, ep.steps)
    q = "Why did you go to the kitchen?"
    exact = answer_from_records(q, ep.header, ep.steps, ep.summary)
    kitchen = [r.step for r in ep.steps if r.action == "go to kitchen"]
    assert exact.kind == "action" and exact.steps == kitchen[:1] and f"at steps {kitchen[0]}" in exact.text
    llm = make_backend(LLMConfig(backend="embedded", embedded_model="smollm2-135m", n_threads=2))
    gen = lambda p: llm.chat(p, max_tokens=80, stop=["\nStudent"]).text  # noqa: E731
    ids = step_memory_ids(stream)
    phrased = phrase_facts(q, exact.text, exact.keep(), [ids[s] for s in exact.steps], gen, model="smollm2-135m")
    assert phrased.grounding == "records" and "go to kitchen" in phrased.text and str(kitchen[0]) in phrased.text
    free = answer_question(q, retrieve_for_question(stream, q, k=5), gen, model="smollm2-135m")
    assert free.error is None and "sink is there" not in free.raw and "needed water" not in free.raw
    assert free.support and all(set(s) >= {"line", "supported", "missing"} for s in free.support)


@pytest.mark.model
def test_a_hundred_visits_to_ten_traces_make_ten_stores_and_a_live_trace_grows_its_own(tmp_path, monkeypatch):
    """Ask's stores are keyed by the episode's content, not the file's time: a class asking about ten episodes a
    hundred times makes ten stores, at most OPEN_STORES stay open, and the live trace's store is extended step by
    step (its first memories keep their ids) rather than written again after every step."""
    import random

    from views import ask

    runs = tmp_path / "runs"
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(runs))
    traces = sorted((ROOT / "assets" / "episodes").glob("*.jsonl"))
    traces += sorted((ROOT / "assets" / "evaluations" / "cpu-30x2x30" / "traces" / "srm").glob("*.jsonl"))[:2]
    assert len(traces) == 10
    rng = random.Random(7)
    visits = [traces[i % 10] for i in range(10)] + [rng.choice(traces) for _ in range(90)]
    for t in visits:
        ep = ask.read_for_ask(t)
        stream = ask.episode_stream(ep.header, ep.steps)
        assert len(stream) == len(ask.episode_memories(ep.header, ep.steps))
        assert len(ask.open_stores()) <= ask.OPEN_STORES
    made = [d for d in ask.ask_root().iterdir() if d.is_dir()]
    assert len(made) == 10
    # a copy of a trace under another name is the same episode: no new store
    copy = runs / "copy-of-an-example.jsonl"
    copy.write_bytes(traces[0].read_bytes())
    ep = ask.read_for_ask(copy)
    ask.episode_stream(ep.header, ep.steps)
    assert len([d for d in ask.ask_root().iterdir() if d.is_dir()]) == 10
    # a live trace, one step at a time
    lines = FULL.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"run_id": "', '"run_id": "live-', 1)  # another episode than the example
    assert "live-" in lines[0]
    live = runs / "20261207-100000-live.jsonl"
    live.write_text("".join(lines[:3]))
    ep = ask.read_for_ask(live)
    first = ask.episode_stream(ep.header, ep.steps)
    ids = [m.id for m in first.memories()]
    where = Path(first.path)
    for k in range(3, 8):
        with open(live, "a") as fh:
            fh.write(lines[k])
        ep = ask.read_for_ask(live)
        grown = ask.episode_stream(ep.header, ep.steps)
        assert Path(grown.path) == where and len(grown) == len(ask.episode_memories(ep.header, ep.steps))
        assert [m.id for m in grown.memories()][: len(ids)] == ids  # extended, not rebuilt
        ids = [m.id for m in grown.memories()]
    assert len([d for d in ask.ask_root().iterdir() if d.is_dir()]) == 11
    # the disk budget: the least recently asked stores go first, the one just written stays
    monkeypatch.setenv("SWIFTSAGE_ASK_STORE_MB", "0.000001")
    deleted = ask.keep_disk_budget(protect=where)
    assert len(deleted) == 10 and [d.name for d in ask.ask_root().iterdir() if d.is_dir()] == [where.name]
