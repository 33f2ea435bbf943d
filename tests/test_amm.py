"""AMM in the agent, for real: the shipped Swift on the real ScienceWorld JVM, a real Chroma store on disk and
the real MiniLM embedder; Sage is a scripted LLM (its prompts are what the tests read)."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from agent_core.amm import SAGE_HEADER, StepFacts, parse_rules, salience
from agent_core.amm import store as amm_store
from agent_core.config import AMMConfig, apply_overrides, preset
from agent_core.controller import Agent, ScriptedSwift, mechanisms
from agent_core.env import catalog
from agent_core.llm import ScriptedBackend
from agent_core.trace import read_episode
from memory_store import MemoryConfig, MemoryStream

pytestmark = pytest.mark.xdist_group("test_amm")

PLAN = "Q1: a pot and water.\nQ2: the pot.\nQ3: fill the pot, heat it.\nQ4: find the pot.\nQ5: no."
INVALID_OBS = ("No known action matches that input.", "Unknown action.")
STEPS = 25


def _llm():
    return ScriptedBackend(lambda p: PLAN if "Answer the five questions" in p else "look around\nteleport to kitchen")


class SpySwift:
    """The shipped Swift model, recording the memory field of every retry (T1)."""

    def __init__(self, inner):
        self.inner, self.name, self.memories = inner, inner.name, []

    def propose(self, state, valid, memory=""):
        if memory:
            self.memories.append(memory)
        return self.inner.propose(state, valid, memory=memory)


@pytest.fixture(scope="module")
def real_swift():
    from agent_core.controller import load_swift

    return load_swift(preset("amm"))


def _cfg(store: Path, name: str = "amm", **extra):
    return apply_overrides(preset(name), {"amm.store_dir": str(store), "amm.warmup": False,
                                          "env.step_limit": STEPS, "amm.reflection": "off", **extra})


@pytest.fixture(scope="module")
def two_episodes(tmp_path_factory, sw_env, real_swift):
    """Two boil episodes on one (initially empty) store: a train variation, then a test variation."""
    tmp = tmp_path_factory.mktemp("amm")
    store = tmp / "store"
    spy = SpySwift(real_swift)
    llm = _llm()
    # SwiftSage's invalid rule: a T1 retry that stays invalid must hand the step to Sage (asserted below)
    agent = Agent(_cfg(store, **{"controller.invalid_rule": "top1"}), spy, llm, env=sw_env, runs_dir=tmp / "runs")
    eps = []
    for split in ("train", "test"):
        info = catalog().get("boil")
        agent.start("boil", (info.train if split == "train" else info.test)[0], split=split)
        agent.run()
        eps.append(read_episode(agent.trace_path))
    return {"episodes": eps, "spy": spy, "llm": llm, "store": store, "tmp": tmp}


# ------------------------------------------------------------------ the salience gate, rule by rule

def _facts(**kw):
    base = dict(task="boil", task_description="Your task is to boil water.", variation=0, room="kitchen",
                inventory="nothing", action="open door", observation="The door is now open.", reward=0.0,
                score_before=10.0, score_after=10.0, done=False)
    return StepFacts(**{**base, **kw})


@pytest.mark.parametrize("kw, rule, tag", [
    (dict(done=True, score_after=100.0, reward=10.0), "ended_100", "success"),
    (dict(done=True, score_after=-100.0, reward=-110.0), "ended_other", "avoidance"),
    (dict(done=True, score_after=40.0), "ended_other", "avoidance"),  # the step limit ended it
    (dict(observation="No known action matches that input."), "invalid_feedback", "avoidance"),
    (dict(observation="You can't move to the kitchen from here."), "invalid_feedback", "avoidance"),
    (dict(action="focus on water", reward=5.0, score_after=15.0), "focus_reward", "success"),
    (dict(reward=25.0, score_after=35.0), "big_reward", "success"),
    (dict(action="wait1", reward=8.0, score_after=18.0), "wait_reward", "near-miss"),
    (dict(reward=3.0, score_after=13.0), "small_reward", "near-miss"),
])
def test_each_salience_rule(kw, rule, tag):
    s = salience(_facts(**kw), AMMConfig())
    assert s is not None and (s.rule, s.tag) == (rule, tag) and s.why


def test_ordinary_steps_are_not_written_and_the_table_is_configurable():
    assert salience(_facts(), AMMConfig()) is None  # no reward, valid, not over
    assert salience(_facts(reward=-5.0, score_after=5.0), AMMConfig()) is None  # a loss is no rule of its own
    # precedence is the table's order: a small reward on a focus is a success only while focus_reward comes first
    f = _facts(action="focus on water", reward=5.0, score_after=15.0)
    cfg = AMMConfig(tag_rules=("small_reward:near-miss", "focus_reward:success"))
    assert salience(f, cfg).rule == "small_reward"
    assert salience(f, AMMConfig(tag_rules=("ended_100:success",))) is None
    with pytest.raises(ValueError, match="unknown rule 'lucky'"):
        parse_rules(AMMConfig(tag_rules=("lucky:success",)))
    with pytest.raises(ValueError, match="unknown tag 'great'"):
        parse_rules(AMMConfig(tag_rules=("big_reward:great",)))


def test_presets_say_what_runs():
    assert "amm" in mechanisms(preset("amm")) and "amm_swift_injection" in mechanisms(preset("amm"))
    assert "amm" not in mechanisms(preset("baseline")) and "amm" not in mechanisms(preset("srm"))
    assert "amm_swift_injection" not in mechanisms(preset("full-no-swift-t1"))
    assert not preset("full-weak-memory").amm.warmup


# ------------------------------------------------------------------ writes, T1, T4, clock: real episodes

def _expected_salient(r) -> bool:
    text = r.observation.strip()
    return (r.done or r.reward > 0 or text.startswith(INVALID_OBS) or "You can't" in text[:120]
            or "You cannot" in text[:120])


@pytest.mark.jvm
@pytest.mark.model
def test_amm_writes_exactly_the_salient_steps(two_episodes):
    total = 0
    for ep in two_episodes["episodes"]:
        assert "amm" in ep.header.mechanisms and ep.header.memory_store == str(two_episodes["store"])
        for r in ep.steps:
            obs_writes = [w for w in r.memories_written if w.type == "observation"]
            assert bool(obs_writes) == _expected_salient(r), (r.step, r.action, r.observation, r.reward)
            assert len(obs_writes) <= 1
            for w in r.memories_written:
                assert w.error is None and bool(w.id) != bool(w.duplicate_of)
                assert w.id == "" or w.importance_source == "tag-rule"
                assert f"ACTION: {r.action}" in w.text or w.type == "plan" or r.menu
            total += sum(1 for w in r.memories_written if w.id)
        assert ep.summary.memory["writes"] and ep.summary.memory["errors"] == 0
    stream = MemoryStream(MemoryConfig(persist_dir=str(two_episodes["store"])), path=two_episodes["store"])
    assert len(stream) == total  # nothing else was written
    # within an episode a record with the same action, result and room is written once
    dups = [w for ep in two_episodes["episodes"] for r in ep.steps for w in r.memories_written if w.duplicate_of]
    ids = {w.id for ep in two_episodes["episodes"] for r in ep.steps for w in r.memories_written if w.id}
    assert all(w.duplicate_of in ids and "not written again" in w.why for w in dups)
    tags = {m.tag for m in stream.memories()}
    assert "plan" in tags and tags <= {"success", "near-miss", "avoidance", "plan"}


@pytest.mark.jvm
@pytest.mark.model
def test_t1_retries_swift_with_at_most_3_records(two_episodes):
    ep2 = two_episodes["episodes"][1]
    t1 = [(r, x) for r in ep2.steps for x in r.retrievals if x.trigger == "T1"]
    assert t1, "the shipped Swift proposes invalid actions on boil: T1 must fire"
    injected = [(r, x) for r, x in t1 if x.injected_into == "swift"]
    assert injected
    for r, x in injected:
        assert r.swift_top1 is not None
        items = x.injected_text.removeprefix("; Memory: [").removesuffix("]").split(" | ")
        assert 1 <= len(items) == len(x.injected_ids) <= 3
        assert x.injected_text in two_episodes["spy"].memories  # exactly what Swift's retry got
        assert set(x.injected_ids) <= set(x.result.top_ids)
        assert all(c.tag in ("success", "near-miss") for c in x.result.top)
        assert "Swift's retry with memory proposed" in x.outcome
        # still invalid after the retry -> the invalid switching rule handed the step to Sage, unless Sage had
        # been called twice in a row (controller.sage_streak_limit): then the rule was set aside and Swift acted
        if "still invalid" in x.outcome:
            assert r.trigger is not None
            fired = r.trigger.evidence.get("set_aside" if r.trigger.name == "swift_forced" else "all_triggers",
                                           [r.trigger.name])
            assert "invalid" in fired


@pytest.mark.jvm
@pytest.mark.model
def test_t4_injects_at_most_5_records_after_the_state(two_episodes):
    seen = 0
    for ep in two_episodes["episodes"]:
        this = ep.header.run_id
        for r in ep.steps:
            plan_calls = [c for c in r.llm_calls if c.purpose == "plan"]
            t4 = [x for x in r.retrievals if x.trigger == "T4"]
            assert len(t4) == len(plan_calls)  # every planning call, and only those
            for x, call in zip(t4, plan_calls):
                if not x.injected_text:
                    assert SAGE_HEADER not in call.prompt  # nothing found: the prompt is unmodified
                    continue
                seen += 1
                lines = x.injected_text.splitlines()
                assert lines[0] == SAGE_HEADER and 1 <= len(lines) - 1 == len(x.injected_ids) <= 5
                assert x.injected_text in call.prompt
                at = call.prompt.index(x.injected_text)
                assert call.prompt.index("Current room:") < at and call.prompt.index("Inventory:") < at
                assert len(x.injected_text) <= AMMConfig().sage_block_chars
            for x in t4:  # the header says "earlier episodes": this episode's own records (its plans) never come in
                assert x.result is not None and all(c.episode != this for c in x.result.candidates)
    assert seen, "the second episode's Sage calls must get hints from the first episode"
    first = [x for r in two_episodes["episodes"][0].steps for x in r.retrievals if x.trigger == "T4"]
    assert first and not any(x.injected_text for x in first)  # the store held only this episode's records


@pytest.mark.model
@pytest.mark.parametrize("this_episode", [False, True])
def test_t4_leaves_out_this_episodes_own_plan_unless_asked(tmp_path, this_episode):
    """Sage's stored plan came back as a hint in its next call and the model copied it word for word, clipped
    '...' included (14 of 14 such calls on dev variations): T4 reads earlier episodes only (`amm.t4_this_episode`)."""
    from agent_core.amm import EpisodicMemory
    from agent_core.amm.episodic import SAGE_HEADER_THIS_EPISODE

    mem = EpisodicMemory(_cfg(tmp_path / "store", **{"amm.t4_this_episode": this_episode}), tmp_path / "runs")
    mem.start_episode("earlier-run", "boil", "Your task is to boil water.", 0)
    mem.stream.add("TASK: boil water | ROOM: kitchen | ACTION: activate stove | RESULT: The stove is on. | TAG: "
                   "near-miss", 1, "observation", importance=5, tag="near-miss", task="boil", episode="earlier-run",
                   extra={"action": "activate stove", "result": "The stove is now activated.", "room": "kitchen",
                          "reward": 5.0, "score_before": 0.0, "score_after": 5.0, "variation": 0})
    mem.start_episode("this-run", "boil", "Your task is to boil water.", 1)
    plan = mem.write_plan(3, {"Q1": "a metal pot in the kitchen", "Q3": "the subgoals are many"}, ["pick up pot"])
    assert plan and plan[0].id
    r = mem.t4(5, "kitchen", "nothing", [("look around", "This room is called the kitchen.")], False)
    ids = {c.id: c.episode for c in r.result.candidates}
    assert "earlier-run" in ids.values() and (plan[0].id in ids) == this_episode
    assert (plan[0].id in r.injected_ids) == this_episode and len(r.injected_ids) == 1 + this_episode
    assert r.injected_text.splitlines()[0] == (SAGE_HEADER_THIS_EPISODE if this_episode else SAGE_HEADER)
    assert ("PLAN (boil, step 3)" in r.injected_text) == this_episode


@pytest.mark.jvm
@pytest.mark.model
def test_recency_tells_episodes_apart(two_episodes, tmp_path):
    ep1, ep2 = two_episodes["episodes"]
    created_1 = [w.now for r in ep1.steps for w in r.memories_written]
    clock2 = ep2.header.memory_at_start["clock"]
    assert clock2 > max(created_1)  # one clock per store, across episodes
    assert ep2.header.memory_at_start["memories"] == len(created_1)
    first = next(x.result for r in ep2.steps for x in r.retrievals if x.result is not None and x.result.candidates)
    decay = first.decay
    assert first.now >= clock2
    for c in first.candidates:  # last week's memories have faded: recency from the store's own clock
        assert c.episode == ep1.header.run_id and c.last_access < clock2
        assert c.recency == pytest.approx(decay ** (first.now - c.last_access)) and c.recency < 1.0
    if len({c.last_access for c in first.candidates}) > 1:
        assert len({round(c.recency_n, 6) for c in first.candidates}) > 1  # no collapse to 0.5 for everyone
    # at the end of episode 2, its own fresh memories are more recent than any untouched old one (asked of the store
    # as episode 2 left it: T4, the retrieval every Sage call makes, reads earlier episodes only)
    store = tmp_path / "store"
    shutil.copytree(two_episodes["store"], store)
    stream = MemoryStream(MemoryConfig(persist_dir=str(store)), path=store)
    end = max(w.now for r in ep2.steps for w in r.memories_written)
    res = stream.retrieve(ep2.header.task_description, end, 50, update_access=False)
    assert {c.episode for c in res.candidates} == {ep1.header.run_id, ep2.header.run_id}
    touched_in_ep2 = {c.id for c in res.candidates if c.last_access >= clock2}
    old = [c.recency for c in res.candidates if c.episode == ep1.header.run_id and c.id not in touched_in_ep2]
    new = [c.recency for c in res.candidates if c.episode == ep2.header.run_id]
    assert old and new and max(old) < min(new)


# ------------------------------------------------------------------ a store that fails mid-run

def _invalid_swift():
    return ScriptedSwift(lambda state, valid: "xyzzy the pot")  # never valid: T1, then Sage every time


@pytest.mark.jvm
@pytest.mark.model
def test_store_removed_mid_run_leaves_prompts_unmodified(tmp_path, sw_env, two_episodes):
    store = tmp_path / "store"
    shutil.copytree(two_episodes["store"], store)
    llm = _llm()
    agent = Agent(_cfg(store, **{"env.step_limit": 12}), _invalid_swift(),
                  llm, env=sw_env, runs_dir=tmp_path / "runs")
    agent.start("boil", catalog().get("boil").test[1], split="test")
    before = [agent.step() for _ in range(3)]
    assert any(x.trigger == "T1" and x.result is not None for r in before for x in r.retrievals)
    shutil.rmtree(store)
    agent.run()
    ep = read_episode(agent.trace_path)
    assert ep.summary.reason == "step_limit" and len(ep.steps) == 12  # the run went on
    after = ep.steps[3:]
    errors = [x for r in after for x in r.retrievals] + [w for r in after for w in r.memories_written
                                                         if not w.duplicate_of]
    assert errors and all(e.error and "is gone" in e.error for e in errors)
    plans = [c for r in after for c in r.llm_calls if c.purpose == "plan"]
    assert plans and all(SAGE_HEADER not in c.prompt for c in plans)
    assert all(x.injected_text == "" and x.injected_into == "" for r in after for x in r.retrievals)
    assert ep.summary.memory["errors"] >= len(errors)


@pytest.mark.jvm
@pytest.mark.model
def test_unwritable_store_is_recorded_and_the_run_goes_on(tmp_path, sw_env, two_episodes, monkeypatch):
    """A store whose database refuses writes (what SQLite says for a read-only store; CI runs as root, for
    whom file permissions do not bind, so the refusal is injected at the Chroma call)."""
    store = tmp_path / "store"
    shutil.copytree(two_episodes["store"], store)
    # any object: the records name kitchen objects, and the episode starts elsewhere (amm.swift_memory_objects)
    agent = Agent(_cfg(store, **{"env.step_limit": 6, "amm.swift_memory_objects": "any"}), _invalid_swift(), _llm(),
                  env=sw_env, runs_dir=tmp_path / "runs")
    agent.start("boil", catalog().get("boil").test[1], split="test")

    def refuse(*a, **k):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(agent.amm.stream._collection, "add", refuse)
    agent.run()
    ep = read_episode(agent.trace_path)
    writes = [w for r in ep.steps for w in r.memories_written]
    assert writes and all("readonly database" in w.error and not w.id for w in writes)
    assert len(ep.steps) == 6
    # reads still work on that store: T1 injected records although writes fail
    assert any(x.injected_into == "swift" for r in ep.steps for x in r.retrievals)


# ------------------------------------------------------------------ the shipped warm store

@pytest.mark.jvm
@pytest.mark.model
def test_warm_store_is_copied_never_written(tmp_path, sw_env, monkeypatch, two_episodes):
    export = tmp_path / "warm.jsonl.gz"
    src = MemoryStream(MemoryConfig(persist_dir=str(two_episodes["store"])), path=two_episodes["store"])
    n = amm_store.export_store(src, export)
    monkeypatch.setattr(amm_store, "WARM_EXPORT", export)
    digest = export.read_bytes()
    cfg = apply_overrides(preset("amm"), {"env.step_limit": 4, "amm.reflection": "off"})  # default: warm store
    agent = Agent(cfg, _invalid_swift(), _llm(), env=sw_env, runs_dir=tmp_path / "runs")
    agent.start("boil", catalog().get("boil").test[2], split="test")
    agent.run()
    ep = read_episode(agent.trace_path)
    assert ep.header.memory_at_start["memories"] == n
    assert ep.header.memory_at_start["seeded_from"] == "copy of the shipped warm store"
    assert Path(ep.header.memory_store) == tmp_path / "runs" / "memory" / "agent"
    assert export.read_bytes() == digest  # the shipped export is untouched
    seed = amm_store.seed_dir(tmp_path / "runs" / "memory", True)
    assert len(MemoryStream(MemoryConfig(persist_dir=str(seed)), path=seed)) == n  # the seed too
    # export -> import keeps ids, tags, times and importance
    lines = [json.loads(x) for x in gzip.open(export, "rt")]
    copy = MemoryStream(MemoryConfig(persist_dir=str(tmp_path / "copy")), path=tmp_path / "copy")
    assert amm_store.import_export(copy, export) == n == len(lines)
    a, b = src.memories(), copy.memories()
    assert [(m.id, m.tag, m.created, m.importance, m.extra) for m in a] == \
           [(m.id, m.tag, m.created, m.importance, m.extra) for m in b]
    # the weak-memory variant starts empty, in its own store
    weak = Agent(apply_overrides(preset("full-weak-memory"), {"env.step_limit": 2, "amm.reflection": "off"}),
                 _invalid_swift(), _llm(), env=sw_env, runs_dir=tmp_path / "runs")
    h = weak.start("boil", catalog().get("boil").test[2], split="test")
    assert h.memory_at_start["memories"] == 0 and h.memory_store.endswith("agent-empty")
    weak.finish("stopped")


def test_shipped_warm_store_manifest_matches_the_export():
    manifest = amm_store.warm_manifest()
    if not amm_store.WARM_EXPORT.exists():
        pytest.fail("assets/memory/warm_store.jsonl.gz is missing: build it with python -m agent_core.warmup")
    lines = [json.loads(x) for x in gzip.open(amm_store.WARM_EXPORT, "rt")]
    assert manifest["memories"] == len(lines) > 100
    assert sum(manifest["by_tag"].values()) == len(lines)
    assert manifest["split"] == "train" and manifest["episodes"] == 60
    assert amm_store.WARM_EXPORT.stat().st_size < 20 * 2 ** 20


# ------------------------------------------------------------------ the Run page's Memory panel, from a real trace

@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.page
def test_run_page_memory_panel_from_a_real_amm_trace(monkeypatch, tmp_path, two_episodes):
    from streamlit.testing.v1 import AppTest

    ep = two_episodes["episodes"][1]
    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(ep.path.parent))
    monkeypatch.setenv("SWIFTSAGE_EXAMPLES_DIR", str(tmp_path / "no-examples"))
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "pages" / "0_Run.py"), default_timeout=120)
    at.session_state["run_source"] = "Live run"  # not the first-visit example
    at.run()
    at.radio(key="run_source").set_value("Recorded episode").run()
    at.selectbox(key="run_trace").set_value(str(ep.path)).run()
    assert not at.exception, at.exception
    step, r = next((r.step, r) for r in ep.steps if any(x.trigger == "T1" and x.injected_text for x in r.retrievals))
    at.slider(key="run_rec_step").set_value(step).run()
    assert not at.exception, at.exception
    md = "\n".join(m.value for m in at.markdown)
    assert "Episodic memory (AMM) at this step" in md and "**T1**" in md
    t1 = next(x for x in r.retrievals if x.trigger == "T1")
    assert any(c.value == t1.injected_text for c in at.code)  # the exact injected text
    bars = []
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        names = [d.get("name", "").split(" ")[0] for d in spec["data"]]
        if names == ["recency", "importance", "relevance"]:
            bars.append(spec)
    assert bars and len(bars[0]["data"][0]["y"]) == len(t1.result.top)  # one stacked bar per retrieved memory
    # the timeline marks T1 / T4
    timeline = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                    if any(d.get("type") == "bar" and d.get("name", "").startswith("Swift")
                           for d in json.loads(c.proto.spec)["data"]))
    names = {d.get("name") for d in timeline["data"]}
    assert "memory T1 (Swift retry)" in names and "memory T4 (Sage hints)" in names
    # a step that wrote a memory shows its tag chip; "Open in the Memory explorer" asks for this retrieval
    at.button(key=f"run_mem_{step}_{r.retrievals.index(t1)}_open").click().run()
    req = at.session_state["mem_open_request"]
    assert req["store"] == ep.header.memory_store and req["result"]["top_ids"] == t1.result.top_ids
    wstep = next(x.step for x in ep.steps if any(w.tag == "avoidance" for w in x.memories_written))
    at.slider(key="run_rec_step").set_value(wstep).run()
    assert ">avoidance</span>" in "\n".join(m.value for m in at.markdown)


# ------------------------------------------------------------------ reflection between episodes

def _reflecting_llm():
    def reply(p: str) -> str:
        if "Answer the five questions" in p:
            return PLAN
        if "Question:" in p:  # memory_store/prompts/reflection_insights.txt
            return "1. Heating needs the stove activated first (because of 1, 2)\n2. an unsupported guess"
        if "high-level questions" in p:  # reflection_questions.txt
            return "What heats the water fastest?\nWhich actions were rejected?\nWhere is the pot?"
        return "look around"
    return ScriptedBackend(reply)


@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.parametrize("background", [False, True])
def test_reflection_runs_between_episodes_and_t4_can_retrieve_it(tmp_path, sw_env, two_episodes, background):
    store = tmp_path / "store"
    shutil.copytree(two_episodes["store"], store)
    llm = _reflecting_llm()
    cfg = _cfg(store, **{"env.step_limit": 8, "amm.reflection": "after_episode", "memory.reflection_threshold": 20})
    agent = Agent(cfg, _invalid_swift(), llm, env=sw_env, runs_dir=tmp_path / "runs",
                  reflect_in_background=background)
    agent.start("boil", catalog().get("boil").test[1], split="test")
    agent.run()
    n_calls = sum(1 for c in llm.calls if "high-level questions" not in c and "Question:" not in c)
    during = llm.calls[:n_calls]
    status = agent.summary.memory["reflection"]
    assert status.startswith("due (") and ("background" in status) == background
    assert not any("high-level questions" in c for c in llm.calls[:len(during)])  # never inside a step
    if background:
        agent.amm.reflection_thread.join(120)
    log = [json.loads(x) for x in (store / "reflections.jsonl").read_text().splitlines()]
    assert log[-1]["after_run"] == read_episode(agent.trace_path).header.run_id
    assert log[-1]["insights"] and log[-1]["started"] > 0 and "seconds" in log[-1]
    stream = MemoryStream(MemoryConfig(persist_dir=str(store)), path=store)
    insights = [m for m in stream.memories() if m.type == "reflection"]
    assert insights and all(m.tag == "insight" and m.evidence_ids and m.importance_source == "fixed" for m in insights)
    assert "Heating needs the stove activated first" in insights[0].description
    # the reflection prompt showed compact one-line statements, at most amm.reflection_window of them
    q_prompt = next(c for c in llm.calls if "high-level questions" in c)
    assert q_prompt.count("\n[m0") <= cfg.amm.reflection_window and "TASK:" not in q_prompt
    # the next episode's Sage call can get it as a hint (T4 includes insights)
    agent.start("boil", catalog().get("boil").test[2], split="test")
    agent.run()
    ep = read_episode(agent.trace_path)
    t4 = [x for r in ep.steps for x in r.retrievals if x.trigger == "T4"]
    assert any(c.tag == "insight" for x in t4 for c in x.result.candidates)
    agent.amm.reflection_thread and agent.amm.reflection_thread.join(120)


# ------------------------------------------------------------------ Full: memory evidence for the Critic

CRITIC = "DIAGNOSIS: stuck at the sink.\nCOURSE_CORRECTION: go to the kitchen.\nACTIONS:\n1. teleport to kitchen\n"


@pytest.mark.jvm
@pytest.mark.model
def test_full_gives_the_critic_memory_evidence(tmp_path, sw_env, two_episodes):
    from agent_core.amm import CRITIC_HEADER

    store = tmp_path / "store"
    shutil.copytree(two_episodes["store"], store)
    llm = ScriptedBackend(lambda p: CRITIC if "You are the Critic" in p else
                          PLAN if "Answer the five questions" in p else "look at sink")
    agent = Agent(_cfg(store, "full", **{"env.step_limit": 8}), ScriptedSwift(lambda s, v: "look at sink"), llm,
                  env=sw_env, runs_dir=tmp_path / "runs")
    agent.start("boil", catalog().get("boil").test[0], split="test")
    recs = [agent.step() for _ in range(8)]
    t2 = next(x for r in recs for x in r.retrievals if x.trigger == "T2")
    assert t2.injected_into == "" and t2.result.top  # retrieved and kept, shown to nobody
    called = next(r for r in recs if r.critic and r.critic.status == "called")
    ev = next(x for x in called.retrievals if x.trigger == "critic")
    assert ev.injected_into == "critic" and 1 <= len(ev.injected_ids) <= 4
    assert ev.injected_text.startswith(CRITIC_HEADER) and ev.injected_text in called.critic.prompt
    # the constraints come before the memory evidence in the Critic's prompt
    assert called.critic.prompt.index("Constraints") < called.critic.prompt.index(CRITIC_HEADER)
    # AMM alone never shows T2 records to a model: same loop, no Critic, no evidence
    plain = Agent(_cfg(store, "amm", **{"env.step_limit": 8}), ScriptedSwift(lambda s, v: "look at sink"), llm,
                  env=sw_env, runs_dir=tmp_path / "runs")
    plain.start("boil", catalog().get("boil").test[0], split="test")
    prec = [plain.step() for _ in range(8)]
    assert any(x.trigger == "T2" for r in prec for x in r.retrievals)
    assert not any(x.trigger == "critic" or (x.trigger in ("T2", "T3") and x.injected_into)
                   for r in prec for x in r.retrievals)


@pytest.mark.jvm
@pytest.mark.model
def test_llm_importance_is_an_option_and_says_so(tmp_path, sw_env):
    llm = ScriptedBackend(lambda p: "Rating: 9" if "rate the likely importance" in p else
                          PLAN if "Answer the five questions" in p else "look around")
    agent = Agent(_cfg(tmp_path / "store", **{"env.step_limit": 4, "amm.importance_mode": "llm"}),
                  _invalid_swift(), llm, env=sw_env, runs_dir=tmp_path / "runs")
    agent.start("boil", catalog().get("boil").test[0], split="test")
    agent.run()
    writes = [w for r in read_episode(agent.trace_path).steps for w in r.memories_written
              if w.type == "observation" and w.id]
    assert writes and all(w.importance == 9 and w.importance_source == "llm" for w in writes)
    assert any("rate the likely importance" in c for c in llm.calls)


@pytest.mark.jvm
@pytest.mark.model
def test_warmup_cli_fills_resumes_and_exports(tmp_path, capsys):
    from agent_core import warmup

    store, export = tmp_path / "store", tmp_path / "out" / "warm.jsonl.gz"
    args = ["--store", str(store), "--tasks", "find-animal", "--variations", "1", "--max-steps", "6",
            "--export", str(export)]
    assert warmup.main(args) == 0
    prog = json.loads((store / "warmup_progress.json").read_text())
    assert [(e["task"], e["variation"]) for e in prog["episodes"]] == [("find-animal", catalog().get("find-animal").train[0])]
    assert prog["episodes"][0]["steps"] <= 6 and prog["settings"]["sage"] is False
    manifest = json.loads((export.parent / "MANIFEST.json").read_text())
    lines = [json.loads(x) for x in gzip.open(export, "rt")]
    assert manifest["memories"] == len(lines) >= 1 and manifest["episodes"] == 1 and manifest["split"] == "train"
    assert sum(manifest["by_tag"].values()) == len(lines)
    # run again: the episode is done, nothing runs, nothing is written twice
    assert warmup.main(args) == 0
    assert "1 episodes (1 done before)" in capsys.readouterr().out
    assert len(json.loads((store / "warmup_progress.json").read_text())["episodes"]) == 1
    assert len([json.loads(x) for x in gzip.open(export, "rt")]) == len(lines)


def test_warmup_cli_unknown_task_is_a_clear_error(tmp_path, capsys):
    from agent_core import warmup

    assert warmup.main(["--store", str(tmp_path / "s"), "--tasks", "fly-to-the-moon"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "fly-to-the-moon" in err and "boil" in err  # names what exists


def test_a_store_inside_the_project_is_recorded_relative_to_it(tmp_path):
    """A shipped example must not name the recording checkout: a store inside the project is written relative to
    it, one outside keeps its absolute path, and the pages resolve the relative one against the project."""
    from agent_core.controller import ROOT, _project_relative
    from views.memory_panels import store_exists
    from agent_core.trace import EpisodeHeader
    from views.stores import resolve_store, short_path

    inside = ROOT / "runs" / "example-stores" / "t-v1-amm"
    assert _project_relative(inside) == "runs/example-stores/t-v1-amm"
    assert _project_relative(tmp_path / "s") == str((tmp_path / "s").resolve()) and _project_relative(None) == ""
    assert _project_relative("http://127.0.0.1:8000/amm-agent") == "http://127.0.0.1:8000/amm-agent"  # a server store
    assert resolve_store("runs/example-stores/t-v1-amm") == inside
    assert resolve_store(str(tmp_path)) == tmp_path
    assert short_path(str(inside)) == "runs/example-stores/t-v1-amm"
    store = ROOT / "runs" / f"test-store-{tmp_path.name}"
    try:
        store.mkdir(parents=True)
        (store / "chroma.sqlite3").write_text("")
        header = EpisodeHeader(task="boil", task_index=0, variation=1, split="test", task_description="", config={},
                               models={})
        header.memory_store = _project_relative(store)
        assert not Path(header.memory_store).is_absolute() and store_exists(header)
    finally:
        import shutil

        shutil.rmtree(store, ignore_errors=True)
