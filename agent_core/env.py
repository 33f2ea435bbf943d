"""ScienceWorld adapter: task catalog, validated loading, typed observations, JVM resilience.

Why not just `ScienceWorldEnv.step`: it recomputes the full valid-action list on every call (most of
a step's time); this adapter asks the JVM only for what a step needs (observation, score, look,
inventory) and computes valid actions on demand, cached until the next step.

The task catalog lives in task_catalog.py and the typed observations in observation.py; every name stays importable
from here.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any

from .config import DEFAULT_SIMPLIFICATIONS, ELECTRICAL_TASKS, EnvConfig  # noqa: F401 - re-exported
from .observation import (  # noqa: F401 - re-exported
    _NOT_VALID_PREFIXES,
    AMBIGUOUS_PREFIX,
    INVALID_ACTION_TEXT,
    Observation,
    _clean_desc,
    listing,
    parse_menu,
    room_of,
    same_lines_reordered,
)
from .task_catalog import (  # noqa: F401 - re-exported
    CATALOG_PATH,
    SPLITS,
    TaskCatalog,
    TaskInfo,
    build_catalog,
    catalog,
    simplifications_for,
)
from .trace import EnvEvent

log = logging.getLogger(__name__)


# A load of the same task and variation now and then lists objects that share a name in another order (the three
# wood cups of the art studio, about 1 load in 50: the JVM's set order follows identity hashes, which depend on thread
# timing). The order decides which cup a menu number picks, so a replay loads again until the order is the recorded
# one; an episode recorded in the rare order is not found again this way, and its replay says so.
RESET_ORDER_TRIES = 8


class EnvError(RuntimeError):
    """The environment could not do what was asked (and could not be restored)."""


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


def reach_in_tree(tree: dict[str, Any], used_names: dict[str, str]) -> dict[str, bool]:
    """`ScienceWorld.reach` from the game's object tree (`getObjectTree()`: nodes with `uuid`, `name`,
    `propContainer` {isOpen} and `contents`) and its object id -> action name table: every object under the room
    that holds the agent, True unless a closed container is on its way down."""
    def find_room(node: dict[str, Any]) -> dict[str, Any] | None:
        kids = node.get("contents") or {}
        if any(k.get("name") == "agent" for k in kids.values()):
            return node
        for k in kids.values():
            hit = find_room(k)
            if hit is not None:
                return hit
        return None

    out: dict[str, bool] = {}

    def walk(node: dict[str, Any], open_path: bool) -> None:
        for kid in (node.get("contents") or {}).values():
            name = used_names.get(str(kid.get("uuid")))
            if name is not None:
                out[name] = out.get(name, False) or open_path
            box = kid.get("propContainer") or {}
            closed = str(box.get("isContainer")).lower() == "true" and box.get("isOpen") is False
            walk(kid, open_path and not closed)

    room = find_room(tree)
    if room is not None:
        walk(room, True)
    return out


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
        self._names_cache: dict[str, list[str]] | None = None
        self._reach_cache: dict[str, bool] | None = None
        self._task_desc = ""
        self.restarts = 0
        self.initial_look = ""  # the episode's starting look (a JVM restart loads until it lists the same order)
        self.reorders = 0  # loads done again this episode because the starting order differed

    # ----- JVM lifecycle
    def _start(self) -> None:
        from scienceworld import ScienceWorldEnv

        # no Java options: even a class-data archive (0.7 s faster a start) changes the game's text (RELIABILITY.md)
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
              generate_gold: bool = False, look: str | None = None) -> Observation:
        """Validate (before touching the JVM), load and reset. `split` restricts the variation range. `look`: the
        starting room a recorded episode saw (resume, fork); a reset that lists the same lines in another order is
        done again (see same_lines_reordered), so a replay starts from the recorded world."""
        info = self.catalog.check_variation(task, variation, split)
        self.task, self.variation = info, variation
        self.split = split or self.catalog.split_of(info.index, variation)
        self.simplifications = simplifications_for(info.name, self.cfg)
        self.actions = []
        self.events = []
        self.restarts = self.reorders = 0
        self.initial_look = ""
        self._gold = generate_gold
        self._with_restart(self._load_and_reset)
        if look is not None:
            self._with_restart(lambda: self._match_look(look))
        self.initial_look = self.last.look  # type: ignore[union-attr]
        if self.reorders:
            self.events.append(EnvEvent(kind="reloaded", detail=(
                f"the task was loaded {self.reorders} more time(s) until it listed its objects in the recorded order"
                if self.initial_look.strip() == (look or "").strip() else
                f"the task was loaded {self.reorders} more time(s) and never listed its objects in the recorded "
                f"order")))
        return self.last  # type: ignore[return-value]

    def _load_and_reset(self) -> None:
        if self.cfg.fresh_jvm and self._sw is not None and self._used:
            self.close()
        self._used = True
        if self._sw is None or not self.jvm_alive():
            self._start()
        self._load()

    def _load(self) -> None:
        assert self.task is not None
        self._sw.load(self.task.name, self.variation, self.simplifications, generateGoldPath=self._gold)
        self._sw.server.reset()
        self._task_desc = _clean_desc(self._sw.server.freeActionTaskDesc())
        self._last_score = 0.0
        self.last = self._raw_step("look around", count=False)

    def _match_look(self, look: str) -> None:
        """Load the task again while its starting look holds `look`'s lines in another order (up to
        RESET_ORDER_TRIES loads). Any other difference is left for the caller to report."""
        for _ in range(RESET_ORDER_TRIES):
            if not same_lines_reordered(self.last.look, look):  # type: ignore[union-attr]
                return
            self.reorders += 1
            self._load_and_reset()  # in a fresh JVM when fresh_jvm, like any reset

    def gold_actions(self) -> list[str]:
        if not self._gold:
            raise EnvError("reset(..., generate_gold=True) first to get the gold action sequence")
        return list(self._sw.server.getGoldActionSequence())

    def _raw_step(self, action: str, count: bool = True, step: int | None = None) -> Observation:
        server = self._sw.server
        text = server.step(action)
        score = float(int(round(100 * server.getScore())))
        completed = bool(server.getCompleted())
        moves = int(server.getNumMoves())
        look = server.freeActionLook()
        inv = server.freeActionInventory()
        self._valid_cache = self._names_cache = self._reach_cache = None
        reward = score - self._last_score
        self._last_score = score
        if step is None:  # (a replay after a JVM restart names each step: the action log is already whole)
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
            # py4j's list(): a round trip per action. Reading it as one string joined in the JVM is 1.14x faster but
            # changes the game's later text in some tasks, so every record would replay otherwise (RELIABILITY.md)
            self._valid_cache = self._with_restart(lambda: list(self._sw.server.getValidActionObjectCombinations()))
        return self._valid_cache

    def object_names(self) -> dict[str, list[str]]:
        """Every name the game gives each object in scope, by the name its actions use: `cloth sittable` ->
        [sittable, cloth sittable, mattress] for the mattress the room text shows. Asked of the JVM on demand (Gate-1
        asks only before dropping an action as naming an unseen object), cached until the next step."""
        if self._names_cache is None:
            def fetch() -> dict[str, list[str]]:
                used = self._sw.get_possible_object_referent_LUT()  # object id -> the name its actions use
                every = self._sw.get_all_object_ids_types_referents_LUTJSON()  # object id -> all its names
                return {name: list(every.get(oid, {}).get("referents", [])) for oid, name in used.items()}
            self._names_cache = self._with_restart(fetch)
        return self._names_cache

    def reach(self) -> dict[str, bool]:
        """Where the game's object tree puts each object of the agent's room, by the name its actions use: True when
        the agent can get at it (in the room, the inventory, or on or in open things, however deep), False when a
        closed container holds it. The room text lists contents only so deep (a block on an inclined plane that
        stands on another plane is not in it), and the valid actions also name what is inside a closed fridge: the
        tree tells the two apart. Asked of the JVM on demand (Gate-1 asks only before dropping an action as naming an
        unseen object; the tree is the whole world, ~0.1 s), cached until the next step."""
        if self._reach_cache is None:
            self._reach_cache = self._with_restart(lambda: reach_in_tree(
                self._sw.getObjectTree(), self._sw.get_possible_object_referent_LUT()))
        return self._reach_cache

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
        order = ""
        if self.task is not None:
            before = self.last
            self._load()
            self._match_look(self.initial_look)  # the episode's own starting order
            if self.initial_look and self.last.look.strip() != self.initial_look.strip():  # type: ignore[union-attr]
                order = "; the new JVM did not list the start in the episode's order, so the replay may differ"
            last = self.last
            self.last = before  # until the replay has succeeded
            for n, a in enumerate(self.actions, 1):
                last = self._raw_step(a, step=n)
            if self.actions:
                self.last = last
        ev = EnvEvent(kind="jvm_restart",
                      detail=f"JVM (pid {old_pid}) lost: {type(exc).__name__}: {str(exc)[:200]}; started pid "
                             f"{self.jvm_pid} and replayed {len(self.actions)} actions in "
                             f"{time.perf_counter() - t0:.1f} s{order}")
        self.events.append(ev)
        log.warning(ev.detail)

    def drain_events(self) -> list[EnvEvent]:
        out, self.events = self.events, []
        return out


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
