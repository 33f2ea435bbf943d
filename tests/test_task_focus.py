"""Swift reads the task before a `focus on` (agent_core/task_focus.py): an object the task does not name is
never an option where the task's train gold paths show that it names its objects; every gold focus passes."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from agent_core.actions import argument_of, canonical, is_focus
from agent_core.controller import ModelSwift
from agent_core.gold import GOLD_PACK, train_gold
from agent_core.swift.format import SwiftState
from agent_core.swift.model import SwiftProposal
from agent_core.task_focus import focus_order, rule_for, target_names, unnamed_focus_actions
from views.narration import narrate

ROOT = Path(__file__).resolve().parents[1]


def _step_detail_captions(trace, monkeypatch) -> str:
    """The Run page (AppTest) replaying a trace: every caption of its step list, joined."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("SWIFTSAGE_RUNS_DIR", str(Path(trace).parent))  # the page opens traces under runs/
    at = AppTest.from_file(str(ROOT / "pages" / "0_Run.py"), default_timeout=180)
    at.query_params["trace"] = str(trace)
    at.run()
    assert not at.error, [e.value for e in at.error]
    at.slider(key="run_rec_step").set_value(1).run()  # a replay opens before its first step
    assert not at.exception, at.exception
    return " ".join(c.value for c in at.caption)

BOIL_TIN = ("Your task is to boil tin. For compounds without a boiling point, combusting the substance is also "
            "acceptable. First, focus on the substance. Then, take actions that will cause it to change its state.")
VIOLET = "Your task is to use chemistry to create violet paint. When you are done, focus on the violet paint."
FIND = "Your task is to find a(n) animal. First, focus on the thing. Then, move it to the red box in the kitchen."


def test_boil_tin_the_pot_of_water_is_not_the_substance():
    water = "In it, you see:\n\ta metal pot (containing a substance called water)\n\ta ceramic cup (containing nothing)"
    tin = "In it, you see:\n\ta metal pot (containing a substance called tin)"
    valid = ["focus on substance in metal pot", "focus on ceramic cup", "focus on tin", "open cupboard"]
    assert unnamed_focus_actions("boil", BOIL_TIN, valid, water) == ["focus on substance in metal pot",
                                                                     "focus on ceramic cup"]
    assert unnamed_focus_actions("boil", BOIL_TIN, valid, tin) == ["focus on ceramic cup"]
    # what the pot holds cannot be read: the target is not judged
    assert target_names("substance in metal pot", "no pot here") is None
    assert unnamed_focus_actions("boil", BOIL_TIN, ["focus on substance in metal pot"], "") == []


def test_paint_the_colour_decides_and_a_bowl_is_read_through_its_contents():
    rule = rule_for("chemistry-mix-paint-secondary-color")
    assert rule.names_objects and "paint" in rule.template
    bowl = "a bowl (containing violet paint)"
    assert rule.allows("violet paint", VIOLET) and not rule.allows("green paint", VIOLET)
    assert rule.allows("paint in bowl", VIOLET, bowl)
    assert not rule.allows("paint in bowl", VIOLET, "a bowl (containing red paint and yellow paint)")
    assert not rule.allows("paint in cup containing yellow paint", VIOLET)


def test_tasks_that_do_not_name_their_objects_are_not_checked_but_rooms_and_doors_are_never_targets():
    for task in ("find-animal", "find-living-thing", "lifespan-longest-lived", "lifespan-shortest-lived"):
        assert not rule_for(task).names_objects, task
    assert unnamed_focus_actions("find-animal", FIND, ["focus on blue jay", "focus on red box"]) == []
    # a find task accepts any object, but no task focuses on a room, a door, the inventory or the air (a 1.5B Sage
    # picked `focus on hallway` in find-non-living-thing when its list still offered it)
    never = ["focus on hallway", "focus on door to kitchen", "focus on inventory", "focus on air"]
    assert unnamed_focus_actions("find-non-living-thing", FIND, never + ["focus on steel table",
                                 "focus on egg turtle in outside"]) == never
    assert unnamed_focus_actions("", BOIL_TIN, ["focus on ceramic cup"]) == []  # no task name: no rule
    assert unnamed_focus_actions("no-such-task", BOIL_TIN, ["focus on ceramic cup"]) == []


MELT = ("Your task is to measure the melting point of tin, which is located around the kitchen. First, focus on the "
        "thermometer. Next, focus on the tin. If the melting point of tin is above 50.0 degrees celsius, focus on the "
        "red box. If the melting point of tin is below 50.0 degrees celsius, focus on the green box.")


def test_where_the_task_orders_its_focuses_a_later_one_waits():
    assert [r for r, _w in focus_order(MELT)] == [0, 1, 2, 2]  # the two boxes are one decision
    assert {t for t in train_gold() if rule_for(t).ordered} == {
        "measure-melting-point-known-substance", "measure-melting-point-unknown-substance", "use-thermometer"}
    valid = ["focus on thermometer", "focus on tin", "focus on red box", "focus on green box", "focus on stove"]
    task = "measure-melting-point-known-substance"
    assert unnamed_focus_actions(task, MELT, valid) == valid[1:]  # the stove is never named; the rest waits
    assert unnamed_focus_actions(task, MELT, valid, done=[("thermometer in inventory", "")]) == valid[2:]
    both = [("thermometer in inventory", ""), ("tin", "")]
    assert unnamed_focus_actions(task, MELT, valid, done=both) == ["focus on stove"]
    # a task whose gold paths do not follow such an order (mendelian: either box) is not ordered
    assert not rule_for("mendelian-genetics-known-plant").ordered


def test_every_train_and_dev_gold_focus_passes():
    """Learned from the train split; the dev split is the check that it holds beyond it (194 focuses), the order
    included (each gold focus is an option after the gold focuses before it)."""
    assert sum(rule_for(t).names_objects for t in train_gold()) == 23
    seen = {"train": 0, "dev": 0}
    with gzip.open(GOLD_PACK, "rt", encoding="utf-8") as fh:
        for line in fh:
            t = json.loads(line)
            rule, ctx, done = rule_for(t["task"]), t["start_look"] + "\n" + t["start_inventory"], []
            for s in t["steps"]:
                if is_focus(s["action"]) and t["final_score"] >= 100:
                    seen[t["split"]] += 1
                    target = argument_of(canonical(s["action"]))
                    assert rule.allows(target, t["task_description"], ctx), (t["task"], t["variation"], s["action"])
                    assert not unnamed_focus_actions(t["task"], t["task_description"], [s["action"]], ctx, done)
                    done.append((target, ctx))
                ctx = s["look"] + "\n" + s.get("inventory", "")
    assert seen["dev"] >= 190 and seen["train"] > 3000


class _Model:
    """Stands in for SwiftModel: records the valid actions it was given and proposes their first focus."""

    name = "stub"

    def __init__(self):
        self.given: list[str] = []

    def propose(self, text, valid_actions, n):
        self.given = list(valid_actions)
        pick = next(v for v in valid_actions if is_focus(v))
        return SwiftProposal(top1="focus on substance in metal pot", candidates=[], action=pick,
                             valid_ranked=[(pick, -0.1)])


@pytest.mark.parametrize("check", [True, False])
def test_swift_never_sees_an_unnamed_focus_and_the_record_says_so(check):
    state = SwiftState(task="boil", task_description=BOIL_TIN, score=0, look="a metal pot (containing water)",
                       inventory="")
    valid = ["focus on substance in metal pot", "focus on tin", "open cupboard"]
    model = _Model()
    prop = ModelSwift(model, task_focus_check=check).propose(state, valid)
    if check:
        assert model.given == ["focus on tin", "open cupboard"] and prop.action == "focus on tin"
        assert prop.focus_unnamed == ["focus on substance in metal pot"]
    else:  # the check off: Swift chooses among everything, as before
        assert model.given == valid and prop.action == "focus on substance in metal pot"
        assert prop.focus_unnamed == []


def test_narration_says_why_a_focus_was_not_an_option():
    from agent_core.trace import StepRecord
    rec = StepRecord(step=4, action="go to kitchen", system="swift", observation="You move.", look="", inventory="",
                     score=0, reward=0, moves=4, done=False, failed=False, room="kitchen",
                     swift_top1="focus on substance in metal pot",
                     swift_focus_unnamed=["focus on substance in metal pot", "focus on ceramic cup"])
    text = " ".join(narrate(rec))
    assert "first guess was to 'focus on substance in metal pot'" in text and "does not name" in text
    # a room is out in every task, named or not: the sentence gives that reason, not the task's wording
    rec.swift_top1, rec.swift_focus_unnamed = "focus on hallway", ["focus on hallway"]
    text = " ".join(narrate(rec))
    assert "first guess was to 'focus on hallway'" in text and "no task focuses on a room" in text
    assert "does not name" not in text


@pytest.mark.jvm
@pytest.mark.page
@pytest.mark.parametrize("check", [True, False])
def test_the_agent_passes_the_task_and_records_what_was_not_an_option(tmp_path, sw_env, check, monkeypatch):
    """The real controller and ScienceWorld (boil tin, test variation 22): the task reaches Swift's state, and the
    step record lists the focus targets that were not options; with the check off Swift's first focus is taken."""
    from agent_core.config import preset
    from agent_core.controller import Agent
    from agent_core.llm import ScriptedBackend
    from agent_core.trace import read_episode

    class FirstFocus(_Model):
        def propose(self, text, valid_actions, n):
            self.given = list(valid_actions)
            pick = next((v for v in valid_actions if is_focus(v)), "look around")
            return SwiftProposal(top1="focus on substance in metal pot", candidates=[], action=pick,
                                 valid_ranked=[(pick, -0.1)])

    cfg = preset("baseline")
    cfg.controller.sage_enabled = False  # Swift alone: no review of the focus
    cfg.swift.task_focus_check = check
    model = FirstFocus()
    agent = Agent(cfg, ModelSwift(model, task_focus_check=check), ScriptedBackend([]), env=sw_env, runs_dir=tmp_path)
    agent.start("boil", 22, split="test")
    assert agent.state.swift_state.task == "boil"
    rec = agent.step()
    header = read_episode(agent.trace_path).header
    if check:  # nothing in the first room is tin: no focus was an option, so Swift's best other action ran
        assert len(rec.swift_focus_unnamed) >= 3 and rec.action == "look around" and not rec.failed
        assert all("tin" not in a.split() for a in rec.swift_focus_unnamed)
        assert "task_focus" in header.mechanisms
        agent.step()  # a second step: the replay's step slider needs two
        caps = _step_detail_captions(agent.trace_path, monkeypatch)  # the step detail lists them
        assert "Not options for Swift" in caps and rec.swift_focus_unnamed[0] in caps
    else:  # the old behaviour: the first focus target in view, and the task ends at -100
        assert rec.swift_focus_unnamed == [] and rec.action.startswith("focus on") and rec.failed
        assert "task_focus" not in header.mechanisms


@pytest.mark.jvm
@pytest.mark.model
@pytest.mark.page
@pytest.mark.parametrize("check", [True, False])
def test_sage_is_not_offered_an_unnamed_focus_and_cannot_play_one(tmp_path, sw_env, check, monkeypatch):
    """The real controller and ScienceWorld (boil tin, test variation 22), Baseline: Swift's action is invalid, so
    Sage plans and picks. With sage.task_focus_check on, the focus targets the task does not name are not in
    Sage's numbered list, and Sage writing one of them anyway does not reach the game; off, it ends the task."""
    from agent_core.config import preset
    from agent_core.controller import Agent, ScriptedSwift, unnamed_in_state
    from agent_core.llm import ScriptedBackend
    from agent_core.trace import read_episode

    cfg = preset("baseline")
    cfg.sage.task_focus_check = check
    plan = "Q1: Tin is not here.\nQ2: Nothing collected.\nQ3: Find tin.\nQ4: Nothing done.\nQ5: None."
    wrong: list[str] = []
    backend = ScriptedBackend(lambda prompt: plan if len(backend.calls) == 1 else wrong[0])
    agent = Agent(cfg, ScriptedSwift(["fly to the moon"] * 5), backend, env=sw_env, runs_dir=tmp_path)
    agent.start("boil", 22, split="test")
    wrong += unnamed_in_state(agent.state.swift_state, agent.env.valid_actions())
    assert wrong, "the first room of boil tin has focus targets the task does not name"
    rec = agent.step()
    assert rec.trigger is not None and rec.trigger.name == "invalid" and len(backend.calls) == 2
    listed = {line.split(". ", 1)[1] for line in backend.calls[1].split("accepts right now")[-1].splitlines()
              if line[:1].isdigit() and ". " in line}
    mechanisms = read_episode(agent.trace_path).header.mechanisms
    if check:
        assert listed and not listed & set(wrong)  # not offered
        assert set(wrong) <= set(rec.sage_focus_unnamed)
        assert any("not played" in n and wrong[0] in n for n in rec.notes)  # written anyway: not played
        assert rec.sage_focus_refused == [wrong[0]]
        assert not rec.action.startswith("focus on") and not rec.failed
        assert "sage_task_focus" in mechanisms
        assert "was not played" in " ".join(narrate(rec))
        agent.step()
        caps = _step_detail_captions(agent.trace_path, monkeypatch)
        assert "Not options for Sage" in caps and wrong[0] in caps
    else:
        assert rec.sage_focus_unnamed == [] and "sage_task_focus" not in mechanisms
        assert rec.action == wrong[0] and rec.failed


def test_narration_of_sage_s_task_check_only_where_it_decided():
    from agent_core.trace import StepRecord

    def rec(action, notes=()):
        return StepRecord(step=9, action=action, system="sage", observation="", look="", inventory="", score=0,
                          reward=0, moves=9, done=False, failed=False, room="workshop", notes=list(notes),
                          sage_focus_unnamed=["focus on inclined plane b", "focus on stopwatch"])
    assert "2 others in view were not in its list" in " ".join(narrate(rec("focus on inclined plane a")))
    assert "not in its list" not in " ".join(narrate(rec("go to hallway")))  # the shorter list did not decide
    refused = rec("look around")
    refused.sage_focus_refused = ["focus on stopwatch"]
    assert "so it was not played" in " ".join(narrate(refused))
