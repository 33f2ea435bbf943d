"""The 30 ScienceWorld tasks: their catalog (assets/task_catalog.json, read without a JVM), the checks of a task and
variation before anything is loaded, the simplifications each task runs with, and the builder of the catalog file.

`agent_core.env` re-exports every name (`python -m agent_core.env --build-catalog` rebuilds the file).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from .config import DEFAULT_SIMPLIFICATIONS, ELECTRICAL_TASKS, EnvConfig

CATALOG_PATH = Path(__file__).resolve().parent.parent / "assets" / "task_catalog.json"
SPLITS = ("train", "dev", "test")


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
