"""Golden test of Swift's input string (SPEC.md section 2)."""
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
