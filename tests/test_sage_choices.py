"""Numbered grounding (agent_core/sage/choices.py): Sage picks commands from a short numbered list of valid
actions. Parser on messy replies, the list builder, the controller with a scripted LLM, and one real call
of the embedded default model that must ground to valid actions."""
from __future__ import annotations

import pytest

from agent_core.config import preset
from agent_core.controller import Agent, ScriptedSwift
from agent_core.env import catalog
from agent_core.llm import ScriptedBackend
from agent_core.sage import Sage, SageContext
from agent_core.sage.choices import build_choices, format_choices, parse_choices

OPTIONS = ["pick up thermometer", "teleport to kitchen", "focus on water", "look at stove", "wait1"]
PLAN = "Q1: A pot and water.\nQ2: The pot.\nQ3: Fill the pot, heat it.\nQ4: Go to the kitchen.\nQ5: No mistake."


@pytest.mark.parametrize("reply, picks, how", [
    ("2, 4", ["teleport to kitchen", "look at stove"], ["number", "number"]),
    ("3 and 1", ["focus on water", "pick up thermometer"], ["number", "number"]),
    ("**4**", ["look at stove"], ["number"]),
    ("Option 2", ["teleport to kitchen"], ["number"]),
    ("I choose option 4 because the stove matters.", ["look at stove"], ["number"]),
    ("The best first step is 2.\nThen 1.", ["teleport to kitchen", "pick up thermometer"], ["number", "number"]),
    # the model echoes the options: the text wins over its own numbering
    ("1. teleport to kitchen\n2. look at stove", ["teleport to kitchen", "look at stove"], ["echo", "echo"]),
    ("Commands:\n- `Teleport to Kitchen`", ["teleport to kitchen"], ["echo"]),
    # a command of its own that is not in the list is kept as written (Gate-1 / mapping check it later)
    ("look around\n2", ["look around", "teleport to kitchen"], ["free", "number"]),
])
def test_parse_choices_on_messy_replies(reply, picks, how):
    got, kinds, _problems = parse_choices(reply, OPTIONS)
    assert got == picks and kinds == how


@pytest.mark.parametrize("reply, picks, how", [
    # sage.choose_reply = "command": the list has no numbers and the model copies a command back
    ("look at stove", ["look at stove"], ["echo"]),
    ("- Look at stove.", ["look at stove"], ["echo"]),
    ("`teleport to kitchen`\n", ["teleport to kitchen"], ["echo"]),
    ("**pick up thermometer**", ["pick up thermometer"], ["echo"]),
    # a valid-looking command that is not in the list is kept as written (the mapping / Gate-1 check it)
    ("move metal pot to stove", ["move metal pot to stove"], ["free"]),
    # it may still answer with a number: that counts, as a position in the list it was shown
    ("2", ["teleport to kitchen"], ["number"]),
])
def test_parse_choices_on_copied_commands(reply, picks, how):
    got, kinds, _problems = parse_choices(reply, OPTIONS)
    assert got == picks and kinds == how


def test_the_command_list_has_no_numbers_to_answer_by():
    assert format_choices(["go to kitchen", "look at stove"], numbered=False) == "- go to kitchen\n- look at stove"


def test_parse_choices_drops_out_of_range_and_repeats_and_caps():
    got, _kinds, problems = parse_choices("9, 2, 2, 0, 5", OPTIONS)
    assert got == ["teleport to kitchen", "wait1"]
    assert "option 9 is not in the list (1-5)" in problems and "option 0 is not in the list (1-5)" in problems
    assert any("repeated" in p for p in problems)
    assert parse_choices("1, 2, 3, 4, 5", OPTIONS, limit=2)[0] == ["pick up thermometer", "teleport to kitchen"]
    got, _k, problems = parse_choices("I am not sure what to do here.", OPTIONS)
    assert got == [] and problems == ["no option number or command in the reply"]


def test_build_choices_puts_swift_first_offers_focus_only_under_review_and_groups_by_verb():
    valid = ["look around", "pick up cup", "pick up thermometer", "teleport to kitchen", "teleport to hallway",
             "focus on cup", "focus on water", "use axe on axe", "open door", "wait1"]
    opts = build_choices(valid, "heat the water", swift_ranked=["teleport to kitchen", "pick up cup"], limit=6)
    assert len(opts) == 6 and "use axe on axe" not in opts  # self-referential strings are never offered
    assert not any(o.startswith("focus on") for o in opts)  # no focus unless Swift ranked one or one is reviewed
    assert opts[:2] == ["teleport to kitchen", "teleport to hallway"]  # grouped: all teleports together, Swift's first
    assert opts.index("pick up cup") < opts.index("pick up thermometer")
    reviewed = build_choices(valid, "", swift_ranked=["focus on cup"], focus=["focus on cup", "focus on water"], limit=6)
    assert reviewed[:2] == ["focus on cup", "focus on water"]
    assert format_choices(["a b", "c d"]) == "1. a b\n2. c d"


@pytest.mark.model
def test_build_choices_ranks_the_rest_by_similarity_to_the_plan():
    from memory_store.embeddings import get_embedder

    valid = [f"pick up {o}" for o in ("sofa", "painting", "book", "thermometer", "cup", "lamp", "shoe")] + \
            ["teleport to kitchen", "teleport to art studio", "look at stove", "activate stove", "open freezer"]
    opts = build_choices(valid, "Turn on the stove to heat the pot", embedder=get_embedder(), limit=3)
    assert "activate stove" in opts and "look at stove" in opts


def _agent(tmp_path, swift, llm, sw_env, **settings):
    """settings: controller.* or sage.* fields by name. The critical trigger is on (`unsure`; off by default)."""
    cfg = preset("baseline")
    cfg.controller.critical_review = "unsure"
    for k, v in settings.items():
        setattr(cfg.controller if hasattr(cfg.controller, k) else cfg.sage, k, v)
    return Agent(cfg, ScriptedSwift(swift), llm, env=sw_env, runs_dir=tmp_path)


@pytest.mark.jvm
@pytest.mark.model
def test_without_choose_turn_the_pick_is_one_new_prompt(tmp_path, sw_env):
    """sage.choose_turn = false: the pick is one prompt that repeats the context and the plan (prompts/choose.txt)."""
    llm = ScriptedBackend(lambda p: PLAN if "Answer the five questions" in p else "1")
    agent = _agent(tmp_path, ["fly to the moon"], llm, sw_env, choose_turn=False)
    agent.start("boil", catalog().get("boil").test[0], split="test")
    r = agent.step()
    plan, ground = r.llm_calls[0], r.llm_calls[1]
    assert r.system == "sage" and "[assistant]" not in ground.prompt
    assert ground.prompt.startswith(plan.prompt.split("Answer the five questions")[0].rstrip("\n"))
    assert "Your plan:\nQ1: A pot and water." in ground.prompt and "Reply with its number only" in ground.prompt


@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.parametrize("reply", ["number", "command"])
def test_agent_grounds_through_the_list_to_exact_valid_actions(tmp_path, sw_env, reply):
    """sage.choose_reply: "number" numbers the list and reads a number; "command" lists "- command" lines (the
    1.5B model answers "11" to numbered lists whatever they hold) and reads the command copied back."""
    def llm(prompt: str) -> str:
        if "Answer the five questions" in prompt:
            return PLAN
        lines = prompt.split("Commands the game accepts right now")[1].splitlines()
        if reply == "number":
            by_text = {t: n for n, t in (line.split(". ", 1) for line in lines if line[:1].isdigit())}
            return f"99, {by_text['go to kitchen']}"  # one out of range, then a good one
        listed = [line[2:] for line in lines if line.startswith("- ")]
        assert "go to kitchen" in listed and not any(line[:1].isdigit() for line in lines)
        return "**Go to kitchen.**"  # decorated, as small models write it

    agent = _agent(tmp_path, ["fly to the moon"], ScriptedBackend(llm), sw_env, choose_reply=reply)
    agent.start("boil", catalog().get("boil").test[0], split="test")
    r = agent.step()
    assert r.system == "sage" and r.action == "go to kitchen" and r.room == "kitchen"
    ground = r.llm_calls[1]
    assert ground.purpose == "ground"
    assert ("Reply with its number only" if reply == "number" else "copied exactly from the list") in ground.prompt
    # the pick is the next turn of the plan's conversation: the plan prompt and Sage's own plan come first, word
    # for word, so llama.cpp re-reads nothing it has already read and only the list is new
    plan = r.llm_calls[0]
    assert ground.prompt.startswith(f"[user]\n{plan.prompt}\n\n[assistant]\n{plan.output}\n\n[user]\nCommands the game")
    if reply == "number":
        assert any("option 99 is not in the list" in n for n in r.notes)
    assert any(n.startswith("Sage picked 'go to kitchen' (option ") for n in r.notes)


@pytest.mark.jvm
@pytest.mark.model
def test_critical_review_offers_the_focus_targets(tmp_path, sw_env):
    seen: dict[str, str] = {}

    def llm(prompt: str) -> str:
        if "Answer the five questions" in prompt:
            return PLAN
        seen["choose"] = prompt
        return "1"

    task = "find-living-thing"
    agent = _agent(tmp_path, lambda s, v: next(a for a in v if a.startswith("focus on")), ScriptedBackend(llm), sw_env,
                   focus_review="replan")  # SwiftSage's review: plan, then the numbered list with the targets
    agent.start(task, catalog().get(task).test[0], split="test")
    r = agent.step()
    assert r.trigger.name == "critical" and r.system == "sage"
    listed = [line.split(". ", 1)[1] for line in seen["choose"].split("accepts right now")[1].splitlines()
              if line[:1].isdigit()]
    assert sum(a.startswith("focus on") for a in listed) >= 2  # the targets in view are compared
    assert "ends the task at once when it names the wrong object" in seen["choose"]
    assert r.action == listed[0]


@pytest.mark.jvm
def test_sure_focus_acts_and_unsure_focus_is_reviewed(tmp_path, sw_env):
    """controller.critical_review="unsure": a focus Swift is sure of (margin >= swift.focus_margin) acts; "off"
    (the default): even a focus Swift is unsure of acts, and Sage is not called."""
    from agent_core.swift.model import SwiftProposal

    class FocusSwift(ScriptedSwift):
        def __init__(self, margin):
            super().__init__(["x"])
            self.margin = margin

        def propose(self, state, valid, memory=""):
            f = [a for a in valid if a.startswith("focus on")][:2]
            return SwiftProposal(top1=f[0], candidates=[(f[0], -0.1)], valid_ranked=[(f[0], -0.1)], action=f[0],
                                 focus=[(f[0], 0.5 + self.margin / 2), (f[1], 0.5 - self.margin / 2)],
                                 focus_margin=self.margin)

    task = "find-living-thing"
    for margin, rule, reviewed in ((0.9, "unsure", False), (0.1, "unsure", True), (0.1, "off", False)):
        cfg = preset("baseline")
        assert cfg.controller.critical_review == "off"
        cfg.controller.critical_review = rule
        cfg.swift.focus_margin = 0.5
        llm = ScriptedBackend(lambda p: PLAN if "Answer the five questions" in p else "2")
        agent = Agent(cfg, FocusSwift(margin), llm, env=sw_env, runs_dir=tmp_path)
        agent.start(task, catalog().get(task).test[0], split="test")
        r = agent.step()
        assert (r.trigger is not None and r.trigger.name == "critical") == reviewed
        assert r.system == ("sage" if reviewed else "swift")
        assert bool(r.llm_calls) == reviewed
        if not reviewed:  # Swift's own focus, its likeliest target
            assert r.action.startswith("focus on") and r.swift_valid_ranked[0].action == r.action


@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.slow
def test_real_embedded_sage_grounds_to_valid_actions(sw_env):
    """One real planning + numbered grounding call of the shipped default model (Qwen2.5-Coder-1.5B)."""
    from agent_core.llm import make_backend
    from agent_core.config import LLMConfig
    from memory_store.embeddings import get_embedder

    obs = sw_env.reset("boil", catalog().get("boil").test[0], split="test")
    valid = sw_env.valid_actions()
    sage = Sage(make_backend(LLMConfig()), preset("baseline").sage, embedder=get_embedder())
    ctx = SageContext(task=obs.task_description, look=obs.look, inventory=obs.inventory, score=obs.score, time=0,
                      history=[], valid=valid, swift_ranked=["teleport to kitchen"])
    res = sage.think(ctx)
    assert res.error is None and set(res.plan) >= {"Q1", "Q4"}
    assert res.options and res.actions, (res.llm_calls[-1].output, res.problems)
    assert set(res.actions) <= set(valid), res.actions  # every pick is a command the game accepts now
    # scored (sage.pick = score, the default): the best of the options by the model's log-probability
    assert res.picked_how == ["score"] and res.scores[0][0] == res.actions[0] == res.llm_calls[-1].output
    assert sorted(o for o, _s in res.scores) == sorted(res.options)
    assert res.llm_calls[-1].prompt.count("[assistant]") == 1  # the pick continued the plan's conversation
    assert all(c.cpu_threads >= 1 for c in res.llm_calls)  # llm.n_threads = 0 chose a thread count, recorded


@pytest.mark.jvm
@pytest.mark.parametrize("reply, expect", [("2", "pick"), ("none", "none"), ("0. none of them yet", "none"),
                                           ("I am unsure", "fallback")])
def test_focus_review_chooses_among_the_targets_or_none(tmp_path, sw_env, reply, expect):
    """controller.focus_review="choose": one short call compares the focus targets in view (no Q1-Q5 plan);
    "none yet" takes Swift's best non-focus action; an unreadable answer falls back to Swift's focus."""
    seen: list[str] = []

    def llm(prompt: str) -> str:
        seen.append(prompt)
        return "0" if reply == "none" else reply

    task = "find-living-thing"
    swift = ScriptedSwift(lambda s, v: next(a for a in v if a.startswith("focus on")))
    cfg = preset("baseline")
    cfg.controller.critical_review = "unsure"
    agent = Agent(cfg, swift, ScriptedBackend(llm), env=sw_env, runs_dir=tmp_path)
    agent.start(task, catalog().get(task).test[0], split="test")
    r = agent.step()
    assert r.trigger.name == "critical" and [c.purpose for c in r.llm_calls] == ["focus_review"]
    assert "A focus on the wrong object ends the task at once" in seen[0] and not r.plan
    listed = [line.split(". ", 1)[1] for line in seen[0].splitlines() if line[:1].isdigit() and line[:2] != "0."]
    assert len(listed) >= 2 and all(a.startswith("focus on") for a in listed)
    assert "0. none of them yet" in seen[0] and "focus on inventory" not in listed and "focus on air" not in listed
    if expect == "pick":
        assert r.system == "sage" and r.action == listed[1]
        assert any("focus review picked" in n for n in r.notes)
    elif expect == "none":
        assert r.system == "swift" and not r.action.startswith("focus on")  # Swift ranked only the focus here
        assert any("none of the" in n and "'look around'" in n for n in r.notes)
    else:
        assert r.action.startswith("focus on") and any("gave no focus target" in n for n in r.notes)


@pytest.mark.jvm
@pytest.mark.model
def test_a_deferred_pick_leaves_swifts_action_and_says_so(tmp_path, sw_env):
    """sage.accept = margin: every option scores alike, so Sage defers: the step is Swift's, the record keeps the
    scores and the deferral, and the narration says why Sage did not overrule Swift."""
    from views.narration import narrate

    llm = ScriptedBackend(lambda p: PLAN, scorer=lambda turn, option: -1.0)
    agent = _agent(tmp_path, ["go to hallway"] * 3, llm, sw_env, accept="margin", stuck_window=1)
    agent.start("boil", catalog().get("boil").test[0], split="test")
    recs = [agent.step() for _ in range(2)]
    called = next(r for r in recs if any(c.purpose == "plan" for c in r.llm_calls))
    kinds = [d.kind for d in called.decisions]
    # Swift's own action, through the last safeguard (from the hallway, 'go to hallway' is not valid)
    assert called.system == "swift" and (called.action == "go to hallway" or "safeguard" in kinds)
    assert "option_scores" in kinds and "sage_pick" not in kinds
    deferred = next(d for d in called.decisions if d.kind == "sage_fallback")
    assert deferred.reason == "deferred" and "by only 0.00" in deferred.error
    assert "not clear enough to overrule Swift" in " ".join(narrate(called, agent.writer.header))
