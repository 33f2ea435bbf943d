"""The ScienceWorld adapter against the real JVM."""
from __future__ import annotations

import os
import signal
import time

import pytest

from agent_core.env import EnvError, ScienceWorld, TaskCatalog, catalog, simplifications_for
from agent_core.observation import listing, same_lines_reordered
from tests.conftest import usual_look

# five tasks of different topics with short gold paths (test variations: never trained on)
GOLD_TASKS = ["find-living-thing", "melt", "chemistry-mix-paint-secondary-color", "lifespan-longest-lived",
              "test-conductivity"]


@pytest.mark.jvm
@pytest.mark.fast
def test_catalog_order_and_lookup(sw_env):
    cat = catalog()
    assert len(cat.tasks) == 30
    # the catalog's order is get_task_names()'s order, index 0-29
    sw_env.reset("boil", cat.get("boil").test[0])
    assert cat.names() == list(sw_env._sw.get_task_names())
    assert [t.index for t in cat.tasks] == list(range(30))
    assert cat.get(0).name == cat.get("0").name == cat.names()[0]
    assert cat.get("1-1").name == "boil"
    assert {t.name for t in cat.by_topic("matter")} >= {"boil", "melt", "freeze"}
    for t in cat.tasks:
        assert t.train and t.test and t.description.startswith("Your task is")
        assert not set(t.train) & set(t.test) and not set(t.dev) & set(t.test)
        assert t.gold_length > 0
    assert len(cat.tasks) == 30 and sum(min(10, len(t.test)) for t in cat.tasks) == 271


def test_electrical_tasks_keep_electrical_actions():
    assert "noElectricalAction" not in simplifications_for("test-conductivity")
    assert "noElectricalAction" in simplifications_for("boil")
    assert "teleportAction" in simplifications_for("test-conductivity")


@pytest.mark.parametrize("task, variation, split, match", [
    ("boyl", 0, None, "unknown task 'boyl'"),
    (30, 0, None, "task index 30 is out of range"),
    ("boil", -1, None, "variation -1 is out of range"),
    ("boil", 10 ** 6, None, "allowed: 0-29"),
    ("boil", 0, "test", "is not a test variation"),
    ("boil", 0, "holdout", "unknown split"),
    ("boil", "3", None, "must be an integer"),
])
def test_bad_inputs_fail_before_the_jvm(task, variation, split, match):
    env = ScienceWorld()
    with pytest.raises(ValueError, match=match):
        env.reset(task, variation, split=split)
    assert env._sw is None  # no JVM was started for a bad request


def test_bad_task_error_lists_what_is_allowed():
    with pytest.raises(ValueError) as e:
        catalog().get("grow")
    assert "grow-fruit" in str(e.value) and "grow-plant" in str(e.value) and "0: boil" in str(e.value)


@pytest.mark.jvm
@pytest.mark.parametrize("task", GOLD_TASKS)
def test_gold_sequence_replays_to_100(sw_env, task):
    info = catalog().get(task)
    var = info.test[0]
    obs = sw_env.reset(task, var, split="test", generate_gold=True)
    assert 0 <= obs.score < 100 and obs.room and obs.task_description.startswith("Your task is")
    gold = sw_env.gold_actions()
    for i, a in enumerate(gold, 1):
        obs = sw_env.step(a)
        assert obs.step == i
        if obs.done:
            break
    assert obs.score == 100 and obs.done and obs.success and not obs.failed
    with pytest.raises(EnvError, match="episode is over"):
        sw_env.step("look around")


@pytest.mark.jvm
def test_observation_fields_and_valid_actions(sw_env):
    obs = sw_env.reset("boil", catalog().get("boil").test[0])
    assert "This room is called" in obs.look and obs.room == obs.look.split("called the ")[1].split(".")[0]
    assert "inventory" in obs.inventory.lower()
    valid = sw_env.valid_actions()
    assert "look around" in valid and len(valid) > 20
    assert sw_env.valid_actions() is valid  # cached until the next step
    obs2 = sw_env.step("teleport to kitchen")
    assert obs2.room == "kitchen" and obs2.action_valid and obs2.reward == obs2.score - obs.score
    assert sw_env.valid_actions() is not valid


@pytest.mark.jvm
@pytest.mark.parametrize("action", ["asdkjhasd", "", "   ", "go to the moon please", "focus on", "x" * 2000,
                                    "pick up\n\tthermometer", "0", "😀 ☃", "open door to door to door"])
def test_gibberish_is_not_valid_not_a_crash(sw_env, action):
    sw_env.reset("boil", catalog().get("boil").test[1])
    obs = sw_env.step(action)
    assert isinstance(obs.text, str)
    assert obs.score >= 0 and not obs.failed
    if action.strip() in ("asdkjhasd", "", "go to the moon please", "😀 ☃"):
        assert obs.action_valid is False
    # the environment still works afterwards
    assert sw_env.step("look around").action_valid


@pytest.mark.jvm
def test_killed_jvm_is_restored_by_replay():
    env = ScienceWorld()
    try:
        info = catalog().get("boil")
        env.reset("boil", info.test[0], split="test", generate_gold=True)
        gold = env.gold_actions()
        for n, a in enumerate(gold, 1):  # play until the score has moved, so its restoration shows
            before = env.step(a)
            if before.score > 0 and n >= 5:
                break
        assert before.score > 0 and not before.done
        pid = env.jvm_pid
        os.kill(pid, signal.SIGKILL)
        for _ in range(50):  # wait until the process is really gone
            if not env.jvm_alive():
                break
            time.sleep(0.1)
        # the next call notices, restarts, replays the 8 actions and then does the new one
        valid = env.valid_actions()
        assert env.jvm_pid != pid and env.restarts == 1
        assert env.last.score == before.score and env.last.text == before.text
        assert env.last.look == before.look and env.last.inventory == before.inventory
        events = env.drain_events()
        assert len(events) == 1 and events[0].kind == "jvm_restart" and f"replayed {n} actions" in events[0].detail
        assert gold[n] in valid or gold[n].isdigit()
        after = env.step(gold[n])
        assert after.step == n + 1
        # and a kill right before a step is also survived
        os.kill(env.jvm_pid, signal.SIGKILL)
        time.sleep(0.5)
        nxt = env.step(gold[n + 1])
        assert nxt.step == n + 2 and env.restarts == 2 and nxt.score >= after.score
    finally:
        env.close()


@pytest.mark.jvm
def test_a_reset_into_a_recorded_look_loads_again_while_the_order_differs(sw_env, monkeypatch, reorder_cups):
    task = "chemistry-mix-paint-secondary-color"
    v = catalog().get(task).test[0]
    recorded = usual_look(sw_env, task, v)  # (an episode recorded in a rare order is not found again)
    reorder_cups(sw_env, 2)
    # (>= : the JVM's own reorders, about 1 load in 50, may add to those made here)
    assert sw_env.reset(task, v, look=recorded).look == recorded and sw_env.reorders >= 2
    assert "until it listed its objects in the recorded order" in sw_env.drain_events()[-1].detail
    reorder_cups(sw_env, 1)
    plain = sw_env.reset(task, v)  # a new episode takes the world as it comes
    assert listing(plain.look) == listing(recorded)
    assert sw_env.reorders == 0 and sw_env.initial_look == plain.look and not sw_env.drain_events()
    # another room is not a matter of order: no load again, the caller reports it
    monkeypatch.undo()
    other = sw_env.reset(task, v, look=recorded + "\n\ta unicorn")
    assert listing(other.look) == listing(recorded) and sw_env.reorders == 0


@pytest.mark.jvm
def test_a_jvm_restart_says_when_it_cannot_find_the_episodes_start_order(sw_env):
    task = "chemistry-mix-paint-secondary-color"
    v = catalog().get(task).test[0]
    sw_env.reset(task, v)
    sw_env.step("look at table")
    lines = sw_env.initial_look.splitlines()
    cups = [i for i, line in enumerate(lines) if "wood cup" in line]
    lines[cups[0]], lines[cups[-1]] = lines[cups[-1]], lines[cups[0]]
    sw_env.initial_look = "\n".join(lines)  # as if the episode had started in an order the loads do not give
    os.kill(sw_env.jvm_pid, signal.SIGKILL)
    time.sleep(0.5)
    sw_env.valid_actions()
    detail = sw_env.drain_events()[-1].detail
    assert "replayed 1 actions" in detail and "did not list the start in the episode's order" in detail
    assert sw_env.restarts == 1 and sw_env.last.step == 1


@pytest.mark.parametrize("a, b, reordered", [
    ("room:\n\ta cup\n\ta pot\n", "room:\n\ta pot\n\ta cup\n", True),
    ("a table. On the table is: a glass cup, a wood cup.", "a table. On the table is: a wood cup, a glass cup.", True),
    ("a table. On the table is: a glass cup, a wood cup.", "a table. On the table is: a tin cup, a glass cup.", False),
    ("room:\n\ta cup\n", "room:\n\ta cup\n", False),  # the same: nothing to load again
    ("room:\n\ta cup\n", "room:\n\ta cup\n\ta cup\n", False),
])
def test_a_listing_in_another_order_is_told_from_another_room(a, b, reordered):
    assert same_lines_reordered(a, b) is reordered


def test_catalog_file_is_required(tmp_path):
    with pytest.raises(FileNotFoundError, match="--build-catalog"):
        TaskCatalog.load(tmp_path / "nope.json")
