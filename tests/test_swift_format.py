"""Golden test of Swift's input string (docs/AGENT.md §2)."""
import pytest

from agent_core.swift.data import trajectory_pairs
from agent_core.swift.format import HistoryStep, SwiftState, swift_input

LOOK = ("This room is called the kitchen. In it, you see: \n\tthe agent\n\ta substance called air\n\ta stove, "
        "which is turned off. On the stove is: nothing.\nYou also see:\n\tA door to the hallway (that is open)")


def _state():
    return SwiftState(
        task_description="Your task is to boil water.",
        score=10, look=LOOK, inventory="In your inventory, you see:\n\tan orange\n", start_room="hallway",
        history=[
            HistoryStep("look around", "This room is called the hallway.", 0, "hallway"),
            HistoryStep("teleport to kitchen", "You teleport to the kitchen.", 10, "kitchen"),
            HistoryStep("eat stove", "No known action matches that input.", 0, "kitchen"),
        ])


def test_golden_input_string():
    expected = (
        "Task: Your task is to boil water.; Time: 3; Score: 10; Action history: ["
        "look around (+0) --> This room is called the hallway. | "
        "teleport to kitchen (+10) --> You teleport to the kitchen. | "
        "eat stove (+0) --> No known action matches that input.]; "
        "Current room: This room is called the kitchen. In it, you see: the agent a substance called air a stove, "
        "which is turned off. On the stove is: nothing. You also see: A door to the hallway (that is open); "
        "Inventory: In your inventory, you see: an orange; Visited rooms: {hallway, kitchen}")
    assert swift_input(_state(), k=10) == expected


def test_window_keeps_the_last_k_steps_oldest_first():
    s = _state()
    s.history = [HistoryStep(f"a{i}", f"o{i}", -5 if i == 11 else 1, "kitchen") for i in range(12)]
    text = swift_input(s, k=10)
    assert "Time: 12;" in text
    assert "[a2 (+1) --> o2 | a3 (+1)" in text and "a1 " not in text
    assert "a11 (-5) --> o11]" in text
    assert "Visited rooms: {hallway, kitchen}" in text


def test_pairs_from_a_trajectory_drop_look_around_and_close_door_and_skip_noops():
    traj = {"task_description": "Your task is to boil water.", "start_score": 0, "start_look": LOOK,
            "start_inventory": "In your inventory, you see: nothing", "start_room": "kitchen",
            "steps": [{"action": a, "observation": f"obs {i}", "look": LOOK, "inventory": "inv", "score": i,
                       "reward": 1 if i else 0, "room": "kitchen"}
                      for i, a in enumerate(["look around", "open cupboard", "close door to hallway", "open door to hallway",
                                            "pick up pot"])]}
    traj["steps"][3]["observation"] = "The door is already open."
    pairs = trajectory_pairs(traj)
    assert [t for _, t in pairs] == ["open cupboard", "pick up pot"]
    # a dropped target that changed the world stays in the history of later inputs ...
    assert "close door to hallway (+1) --> obs 2" in pairs[1][0]
    # ... while no-ops (look around, opening an open door) vanish from it and from Time
    assert "look around" not in pairs[1][0] and "open door" not in pairs[1][0] and "Time: 2;" in pairs[1][0]


@pytest.mark.jvm
def test_one_history_builder_for_training_and_the_agent(sw_env, tmp_path):
    """No-op steps (look around, opening what is already open) never enter Swift's history or Time: the
    trainer's pairs and the agent's inputs come from the same SwiftState.observe."""
    from agent_core.config import apply_overrides, preset
    from agent_core.controller import Agent, ScriptedSwift
    from agent_core.env import catalog
    from agent_core.llm import ScriptedBackend
    from agent_core.swift.data import load_trajectories, trajectory_pairs
    from agent_core.swift.format import SwiftState, swift_input

    s = SwiftState("Your task is to boil water.", 0, "a kitchen", "nothing")
    assert not s.observe("look around", "This room is called the kitchen.", 0, "kitchen", 0, "kitchen2", "inv2")
    assert not s.observe("open door to hallway", "The door is already open.", 0, "kitchen", 0, "k", "i")
    assert s.history == [] and s.time == 0 and (s.look, s.inventory) == ("k", "i")
    assert s.observe("open cupboard", "The cupboard is now open.", 0, "kitchen", 0, "k", "i") and s.time == 1

    # training pairs: built by the same function, so replaying a gold path through observe() gives them back
    traj = next(t for t in load_trajectories("dev") if any(st["action"] == "look around" for st in t["steps"]))
    state = SwiftState(traj["task_description"], traj["start_score"], traj["start_look"], traj["start_inventory"],
                       start_room=traj["start_room"])
    inputs = []
    for st in traj["steps"]:
        inputs.append(swift_input(state))
        state.observe(st["action"], st["observation"], st["reward"], st["room"], st["score"], st["look"],
                      st["inventory"])
    assert {i for i, _ in trajectory_pairs(traj)} <= set(inputs)
    assert all("look around (" not in i for i in inputs)

    # the agent: Swift is asked after two look-arounds with Time 0 and an empty history
    seen = []

    def swift(state, valid):
        seen.append((state.time, [h.action for h in state.history]))
        return "look around" if len(seen) <= 2 else "inventory"

    cfg = apply_overrides(preset("baseline"), {"controller.sage_enabled": False})
    agent = Agent(cfg, ScriptedSwift(swift), ScriptedBackend([]), env=sw_env, runs_dir=tmp_path)
    agent.start("boil", catalog().get("boil").test[0], split="test")
    for _ in range(4):
        agent.step()
    assert seen[:3] == [(0, []), (0, []), (0, [])] and seen[3] == (1, ["inventory"])
    assert [r.action for r in agent.records] == ["look around", "look around", "inventory", "inventory"]
