"""ScienceWorld adapter: task catalog, validated loading, typed observations, JVM resilience.

Why not just `ScienceWorldEnv.step`: it recomputes the full valid-action list on every call (most of
a step's time); this adapter asks the JVM only for what a step needs (observation, score, look,
inventory) and computes valid actions on demand, cached until the next step.
"""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .config import DEFAULT_SIMPLIFICATIONS, ELECTRICAL_TASKS, EnvConfig
from .trace import EnvEvent

log = logging.getLogger(__name__)

CATALOG_PATH = Path(__file__).resolve().parent.parent / "assets" / "task_catalog.json"
SPLITS = ("train", "dev", "test")
INVALID_ACTION_TEXT = "No known action matches that input."
_ROOM_RE = re.compile(r"This room is called the ([^.]+)\.")
# Observations that mean the action did nothing (not a crash): the agent must be told it was not valid.
_NOT_VALID_PREFIXES = (INVALID_ACTION_TEXT, "Unknown action.")
AMBIGUOUS_PREFIX = "Ambiguous request"
_MENU_ROW = re.compile(r"^\s*(\d+):\s*(.+?)\s*$")


def parse_menu(text: str) -> list[str]:
    """The options of ScienceWorld's ambiguity menu ("Ambiguous request: ... 0: look at yellow paint ..."),
    in number order; [] when the text is not such a menu."""
    if not (text or "").lstrip().startswith(AMBIGUOUS_PREFIX):
        return []
    rows = [m for m in (_MENU_ROW.match(line) for line in text.splitlines()) if m]
    return [m.group(2) for m in sorted(rows, key=lambda m: int(m.group(1)))]


class EnvError(RuntimeError):
    """The environment could not do what was asked (and could not be restored)."""


# ---------------------------------------------------------------- catalog

@dataclass
class TaskInfo:
    index: int  # position in get_task_names(), 0-29
    name: str  # e.g. "boil"
    task_id: str  # ScienceWorld's id, e.g. "1-1"
    topic: str  # e.g. "Matter"
    title: str  # e.g. "Changes of State (Boiling)"
    description: str  # the task description of the first train variation
    train: list[int]
    dev: list[int]
    test: list[int]
    max_variations: int
    gold_lengths: dict[str, int] = field(default_factory=dict)  # "test:<var>" -> gold path length
    electrical: bool = False

    @property
    def gold_length(self) -> float:
        """Mean gold-path length over the cached variations (used for Short/Medium/Long groups)."""
        vals = list(self.gold_lengths.values())
        return sum(vals) / len(vals) if vals else float("nan")

    def variations(self, split: str) -> list[int]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
        return getattr(self, split)


class TaskCatalog:
    """The 30 tasks in `get_task_names()` order, loaded from assets/task_catalog.json (no JVM)."""

    def __init__(self, tasks: list[TaskInfo]):
        self.tasks = tasks
        self._by_name = {t.name: t for t in tasks}
        self._by_id = {t.task_id: t for t in tasks}

    @classmethod
    def load(cls, path: str | Path = CATALOG_PATH) -> "TaskCatalog":
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"task catalog {path} is missing; build it with "
                                    f"`python -m agent_core.env --build-catalog`")
        data = json.loads(path.read_text())
        return cls([TaskInfo(**t) for t in data["tasks"]])

    def names(self) -> list[str]:
        return [t.name for t in self.tasks]

    def topics(self) -> list[str]:
        return sorted({t.topic for t in self.tasks})

    def by_topic(self, topic: str) -> list[TaskInfo]:
        found = [t for t in self.tasks if t.topic.lower() == topic.lower()]
        if not found:
            raise ValueError(f"unknown topic {topic!r}; topics are: {', '.join(self.topics())}")
        return found

    def get(self, task: str | int) -> TaskInfo:
        """A task by name ("boil"), index (0-29, also as a string) or ScienceWorld id ("1-1")."""
        if isinstance(task, int) or (isinstance(task, str) and task.strip().isdigit()):
            idx = int(task)
            if not 0 <= idx < len(self.tasks):
                raise ValueError(f"task index {idx} is out of range; tasks are indexed 0-{len(self.tasks) - 1}")
            return self.tasks[idx]
        key = task.strip()
        if key in self._by_name:
            return self._by_name[key]
        if key in self._by_id:
            return self._by_id[key]
        close = [n for n in self.names() if key.lower() in n.lower()]
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown task {task!r}.{hint} Known tasks (index: name): " +
                         ", ".join(f"{t.index}: {t.name}" for t in self.tasks))

    def check_variation(self, task: str | int, variation: int, split: str | None = None) -> TaskInfo:
        """Raise ValueError naming what is allowed when `variation` is not in the split (or in no split)."""
        info = self.get(task)
        if isinstance(variation, bool) or not isinstance(variation, int):
            raise ValueError(f"variation must be an integer, got {variation!r}")
        if split is not None:
            allowed = info.variations(split)
            if variation not in allowed:
                raise ValueError(f"variation {variation} is not a {split} variation of task {info.name!r}; "
                                 f"{split} variations are {_ranges(allowed)}")
        elif not 0 <= variation < info.max_variations:
            raise ValueError(f"variation {variation} is out of range for task {info.name!r}; "
                             f"allowed: 0-{info.max_variations - 1}")
        return info

    def split_of(self, task: str | int, variation: int) -> str:
        info = self.get(task)
        for s in SPLITS:
            if variation in info.variations(s):
                return s
        raise ValueError(f"variation {variation} of {info.name!r} is in no split")


def _ranges(values: Iterable[int]) -> str:
    """[0,1,2,5,6] -> '0-2, 5-6' so an error message stays short."""
    vals = sorted(values)
    if not vals:
        return "(none)"
    out, start, prev = [], vals[0], vals[0]
    for v in vals[1:]:
        if v == prev + 1:
            prev = v
            continue
        out.append(f"{start}-{prev}" if start != prev else str(start))
        start = prev = v
    out.append(f"{start}-{prev}" if start != prev else str(start))
    return ", ".join(out)


_CATALOG: TaskCatalog | None = None


def catalog() -> TaskCatalog:
    global _CATALOG
    if _CATALOG is None:
        _CATALOG = TaskCatalog.load()
    return _CATALOG


def simplifications_for(task_name: str, cfg: EnvConfig | None = None) -> str:
    """The SwiftSage simplification string for a task; electrical tasks drop noElectricalAction."""
    simp = list(cfg.simplifications if cfg else DEFAULT_SIMPLIFICATIONS)
    electrical = cfg.electrical_tasks if cfg else ELECTRICAL_TASKS
    if task_name in electrical:
        simp = [s for s in simp if s != "noElectricalAction"]
    return ",".join(simp)


# ---------------------------------------------------------------- observations

@dataclass
class Observation:
    text: str  # what the environment said in reply to the action
    look: str  # current room and visible objects ("look around", free)
    inventory: str
    task_description: str
    score: float  # cumulative, 0-100; negative means failed
    reward: float  # score change of this step
    moves: int
    done: bool
    failed: bool  # score < 0
    room: str
    action: str = ""  # the action that produced this observation ("" for reset)
    action_valid: bool = True  # False when the parser matched nothing
    step: int = 0  # agent steps taken so far in this episode
    # ScienceWorld answered an ambiguous action with a numbered menu: its options (index = number to send)
    menu: list[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.score >= 100

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clean_desc(desc: str) -> str:
    return desc.replace("Task Description:", "", 1).strip()


def room_of(look: str) -> str:
    m = _ROOM_RE.search(look or "")
    return m.group(1).strip() if m else ""


def is_dead_jvm_error(exc: BaseException) -> bool:
    """A lost connection to the JVM, as opposed to a Java exception from a live one."""
    try:
        from py4j.protocol import Py4JJavaError, Py4JNetworkError
    except ImportError:  # pragma: no cover
        return isinstance(exc, (ConnectionError, EOFError, BrokenPipeError))
    if isinstance(exc, Py4JJavaError):
        return False
    if isinstance(exc, (Py4JNetworkError, ConnectionError, EOFError, BrokenPipeError, OSError)):
        return True
    from py4j.protocol import Py4JError

    return isinstance(exc, Py4JError) and "answer" in str(exc).lower()  # "error while receiving/sending"


class ScienceWorld:
    """One episode at a time in one JVM. Usage:

        env = ScienceWorld(); obs = env.reset("boil", 0, split="test"); obs = env.step("look around")
    """

    def __init__(self, cfg: EnvConfig | None = None, task_catalog: TaskCatalog | None = None):
        self.cfg = cfg or EnvConfig()
        self.catalog = task_catalog or catalog()
        self._sw = None  # scienceworld.ScienceWorldEnv, started lazily
        self._used = False  # a task was loaded into this JVM (fresh_jvm: the next reset starts a new one)
        self.task: TaskInfo | None = None
        self.variation: int | None = None
        self.split: str | None = None
        self.simplifications = ""
        self.actions: list[str] = []  # the episode's action log, replayed after a JVM restart
        self.events: list[EnvEvent] = []  # restarts etc.; the controller copies them into step records
        self.last: Observation | None = None
        self._valid_cache: list[str] | None = None
        self._task_desc = ""
        self.restarts = 0

    # ----- JVM lifecycle
    def _start(self) -> None:
        from scienceworld import ScienceWorldEnv

        kwargs: dict[str, Any] = {"envStepLimit": 10 ** 6}  # the step limit is ours, not the JVM's
        if self.cfg.jar_path:
            kwargs["serverPath"] = self.cfg.jar_path
        self._sw = ScienceWorldEnv("", **kwargs)

    @property
    def jvm_pid(self) -> int | None:
        try:
            return self._sw._gateway.java_process.pid if self._sw else None
        except AttributeError:
            return None

    def jvm_alive(self) -> bool:
        try:
            return self._sw is not None and self._sw._gateway.java_process.poll() is None
        except AttributeError:
            return False

    def close(self) -> None:
        if self._sw is not None:
            try:
                self._sw.close()
            except Exception:  # a dead JVM cannot be shut down politely
                pass
            try:
                proc = self._sw._gateway.java_process
                if proc.poll() is None:
                    proc.kill()
            except Exception:
                pass
            self._sw = None

    def __enter__(self) -> "ScienceWorld":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ----- episodes
    def reset(self, task: str | int, variation: int, split: str | None = None,
              generate_gold: bool = False) -> Observation:
        """Validate (before touching the JVM), load and reset. `split` restricts the variation range."""
        info = self.catalog.check_variation(task, variation, split)
        self.task, self.variation = info, variation
        self.split = split or self.catalog.split_of(info.index, variation)
        self.simplifications = simplifications_for(info.name, self.cfg)
        self.actions = []
        self.events = []
        self.restarts = 0
        self._gold = generate_gold
        self._with_restart(self._load_and_reset)
        return self.last  # type: ignore[return-value]

    def _load_and_reset(self) -> None:
        if self.cfg.fresh_jvm and self._sw is not None and self._used:
            self.close()
        self._used = True
        if self._sw is None or not self.jvm_alive():
            self._start()
        assert self.task is not None
        self._sw.load(self.task.name, self.variation, self.simplifications, generateGoldPath=self._gold)
        self._sw.server.reset()
        self._task_desc = _clean_desc(self._sw.server.freeActionTaskDesc())
        self._last_score = 0.0
        self.last = self._raw_step("look around", count=False)

    def gold_actions(self) -> list[str]:
        if not self._gold:
            raise EnvError("reset(..., generate_gold=True) first to get the gold action sequence")
        return list(self._sw.server.getGoldActionSequence())

    def _raw_step(self, action: str, count: bool = True) -> Observation:
        server = self._sw.server
        text = server.step(action)
        score = float(int(round(100 * server.getScore())))
        completed = bool(server.getCompleted())
        moves = int(server.getNumMoves())
        look = server.freeActionLook()
        inv = server.freeActionInventory()
        self._valid_cache = None
        reward = score - self._last_score
        self._last_score = score
        step = len(self.actions) + (1 if count else 0)
        failed = score < 0
        done = completed or failed or score >= 100 or (count and step >= self.cfg.step_limit)
        return Observation(
            text=text, look=look, inventory=inv, task_description=self._task_desc, score=score,
            reward=reward if count else 0.0, moves=moves, done=done, failed=failed, room=room_of(look),
            action=action if count else "", action_valid=not text.startswith(_NOT_VALID_PREFIXES), step=step,
            menu=parse_menu(text),
        )

    def step(self, action: str) -> Observation:
        """One agent step. Never raises for a bad action (it comes back `action_valid=False`)."""
        if self.task is None or self.last is None:
            raise EnvError("call reset(task, variation) before step()")
        if self.last.done:
            raise EnvError(f"the episode is over (score {self.last.score:g}); reset to start another")
        action = " ".join(str(action).split())  # the parser chokes on newlines/tabs, not on words
        if len(action) > 500:
            action = action[:500]
        obs = self._with_restart(lambda: self._raw_step(action))
        self.actions.append(action)
        self.last = obs
        return obs

    def valid_actions(self) -> list[str]:
        """The valid-action set of the current state (computed on demand, cached until the next step)."""
        if self._valid_cache is None:
            self._valid_cache = self._with_restart(lambda: list(self._sw.server.getValidActionObjectCombinations()))
        return self._valid_cache

    def valid_actions_with_templates(self) -> list[dict[str, Any]]:
        raw = self._with_restart(lambda: self._sw.server.getValidActionObjectCombinationsJSON())
        return json.loads(raw)["validActions"]

    def possible_action_templates(self) -> list[str]:
        return self._with_restart(lambda: list(self._sw.server.getPossibleActions()))

    # ----- resilience
    def _with_restart(self, fn):
        attempts = 0
        while True:
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - classified right below
                if not is_dead_jvm_error(exc) and self.jvm_alive():
                    raise
                attempts += 1
                if attempts > self.cfg.jvm_restart_limit:
                    raise EnvError(f"the ScienceWorld JVM died and {self.cfg.jvm_restart_limit} restarts "
                                   f"did not bring it back: {exc}") from exc
                self._restart(exc)

    def _restart(self, exc: BaseException) -> None:
        """Start a new JVM and restore the episode by replaying its action log."""
        t0 = time.perf_counter()
        old_pid = self.jvm_pid
        self.close()
        self._start()
        self.restarts += 1
        if self.task is not None:
            self._sw.load(self.task.name, self.variation, self.simplifications, generateGoldPath=self._gold)
            self._sw.server.reset()
            self._task_desc = _clean_desc(self._sw.server.freeActionTaskDesc())
            self._last_score = 0.0
            last = self._raw_step("look around", count=False)
            for a in self.actions:
                last = self._raw_step(a)
            if self.actions:
                self.last = last
        ev = EnvEvent(kind="jvm_restart",
                      detail=f"JVM (pid {old_pid}) lost: {type(exc).__name__}: {str(exc)[:200]}; started pid "
                             f"{self.jvm_pid} and replayed {len(self.actions)} actions in "
                             f"{time.perf_counter() - t0:.1f} s")
        self.events.append(ev)
        log.warning(ev.detail)

    def drain_events(self) -> list[EnvEvent]:
        out, self.events = self.events, []
        return out


# ---------------------------------------------------------------- catalog builder

def build_catalog(path: str | Path = CATALOG_PATH, gold_variations: int = 3) -> TaskCatalog:
    """Load every task once (the JVM gives the splits and descriptions) and cache the gold-path
    lengths of the first `gold_variations` test variations."""
    from scienceworld import ScienceWorldEnv
    from scienceworld.constants import TASKS
    from tqdm import tqdm

    meta = {t["task_name"]: t for t in TASKS}
    sw = ScienceWorldEnv("", envStepLimit=10 ** 6)
    tasks: list[TaskInfo] = []
    try:
        for idx, name in enumerate(tqdm(sw.get_task_names(), desc="catalog")):
            simp = simplifications_for(name)
            sw.load(name, 0, simp)
            train, dev, test = sw.get_variations_train(), sw.get_variations_dev(), sw.get_variations_test()
            sw.load(name, train[0], simp)
            sw.reset()
            desc = sw.get_task_description()
            gold: dict[str, int] = {}
            for v in test[:gold_variations]:
                sw.load(name, v, simp, generateGoldPath=True)
                gold[f"test:{v}"] = len(sw.get_gold_action_sequence())
            m = meta.get(name, {})
            tasks.append(TaskInfo(index=idx, name=name, task_id=m.get("task_id", ""), topic=m.get("topic", ""),
                                  title=m.get("task", name), description=desc.strip(), train=train, dev=dev,
                                  test=test, max_variations=sw.get_max_variations(name), gold_lengths=gold,
                                  electrical=name in ELECTRICAL_TASKS))
    finally:
        sw.close()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"simplifications": list(DEFAULT_SIMPLIFICATIONS),
                                "tasks": [asdict(t) for t in tasks]}, indent=1))
    return TaskCatalog(tasks)


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description="ScienceWorld adapter utilities")
    ap.add_argument("--build-catalog", action="store_true", help="rebuild assets/task_catalog.json")
    ap.add_argument("--list", action="store_true", help="print the task catalog")
    args = ap.parse_args()
    if args.build_catalog:
        cat = build_catalog()
        print(f"wrote {CATALOG_PATH} ({len(cat.tasks)} tasks)")
    if args.list or not args.build_catalog:
        for t in catalog().tasks:
            print(f"{t.index:2d} {t.task_id:5s} {t.name:50s} {t.topic:12s} train={len(t.train):3d} "
                  f"dev={len(t.dev):3d} test={len(t.test):3d} gold~{t.gold_length:.0f}")


if __name__ == "__main__":
    main()
