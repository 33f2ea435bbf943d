"""Behaviour-cloning data for Swift from ScienceWorld's gold trajectories.

    .venv/bin/python -m agent_core.swift.data extract [--workers 2]   # replay gold paths (resumable)
    .venv/bin/python -m agent_core.swift.data pairs                   # build (input, target) pairs

Extraction replays `get_gold_action_sequence()` of train variations (dev ones for validation; test
never) under the protocol's simplifications (docs/AGENT.md §1), through the same adapter the agent uses, and
records per step the action, observation, look, inventory, score, reward and room. Each variation is one small
gzipped JSON file, written atomically, so an interrupted run resumes where it stopped; `pack` bundles
them into one compressed file that is committed (assets/swift/gold_trajectories.jsonl.gz).
Down-sampling as SwiftSage did: topics 9 and 10 capped at 50 train variations per task, task 3-3
at 100; `look around` and `close door` targets are dropped. Steps that change nothing the input does
not already show (`look around`: the current room is in the input; opening what "is already open", which
every gold path does for doors under the openDoors simplification) are removed from the
history as well: Swift's own episodes never contain them, and a model trained on histories full of
them learned "open door to X" as its favourite (always invalid) action and looped between two rooms.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Iterator

from ..env import ScienceWorld, TaskInfo, catalog
from .format import SwiftState, is_noop, swift_input

ROOT = Path(__file__).resolve().parents[2]
RAW_DIR = ROOT / "data" / "swift" / "gold"
PACKED = ROOT / "assets" / "swift" / "gold_trajectories.jsonl.gz"
PAIRS_DIR = ROOT / "data" / "swift"

TOPIC_CAPS = {"9": 50, "10": 50}  # topic number -> max train variations per task
TASK_CAPS = {"3-3": 100}
DEV_PER_TASK = 5  # dev variations per task used for validation
DROP_TARGETS = ("look around", "close door")


@dataclass
class GoldStep:
    action: str
    observation: str
    look: str
    inventory: str
    score: float
    reward: float
    room: str


@dataclass
class GoldTrajectory:
    task: str
    task_id: str
    variation: int
    split: str
    task_description: str
    start_look: str
    start_inventory: str
    start_room: str
    start_score: float
    steps: list[GoldStep]
    final_score: float
    seconds: float


def selected_variations(info: TaskInfo, split: str) -> list[int]:
    if split == "train":
        cap = TASK_CAPS.get(info.task_id, TOPIC_CAPS.get(info.task_id.split("-")[0]))
        return info.train[:cap] if cap else list(info.train)
    if split == "dev":
        return info.dev[:DEV_PER_TASK]
    raise ValueError("Swift is never trained or tuned on test variations")


def jobs(splits: Iterable[str]) -> list[tuple[str, int, str]]:
    """(task, variation, split): dev first, then train interleaved across tasks (round i takes every
    task's i-th variation), so a partial run has validation data and covers every task evenly."""
    out: list[tuple[str, int, str]] = []
    for split in sorted(splits, key=lambda s: s != "dev"):
        per_task = [[(t.name, v, split) for v in selected_variations(t, split)] for t in catalog().tasks]
        i = 0
        while any(i < len(p) for p in per_task):
            out.extend(p[i] for p in per_task if i < len(p))
            i += 1
    return out


def raw_path(task: str, variation: int, split: str) -> Path:
    return RAW_DIR / split / f"{task}-{variation}.json.gz"


def replay(env: ScienceWorld, task: str, variation: int, split: str) -> GoldTrajectory:
    t0 = time.perf_counter()
    obs = env.reset(task, variation, split=split, generate_gold=True)
    start = obs
    steps: list[GoldStep] = []
    for action in env.gold_actions():
        obs = env.step(action)
        steps.append(GoldStep(action=action, observation=obs.text, look=obs.look, inventory=obs.inventory,
                              score=obs.score, reward=obs.reward, room=obs.room))
        if obs.done:
            break
    info = env.task
    return GoldTrajectory(task=task, task_id=info.task_id, variation=variation, split=split,
                          task_description=start.task_description, start_look=start.look,
                          start_inventory=start.inventory, start_room=start.room, start_score=start.score,
                          steps=steps, final_score=obs.score, seconds=time.perf_counter() - t0)


def _worker(job_list: list[tuple[str, int, str]], queue) -> None:
    env = ScienceWorld()
    env.cfg.step_limit = 10 ** 6  # gold paths may be longer than an agent's step limit
    try:
        for task, var, split in job_list:
            path = raw_path(task, var, split)
            if path.exists():
                queue.put(("skip", task, var, 0.0))
                continue
            try:
                traj = replay(env, task, var, split)
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                queue.put(("error", task, var, f"{type(e).__name__}: {e}"))
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            with gzip.open(tmp, "wt", encoding="utf-8") as fh:
                json.dump(asdict(traj), fh)
            os.replace(tmp, path)
            queue.put(("done", task, var, traj.final_score))
    finally:
        env.close()
        queue.put(("exit", "", 0, 0.0))


def unpack_missing() -> int:
    """Write the committed pack's trajectories back as raw files where those are missing, so extraction
    on a fresh clone resumes after what was committed instead of replaying it again."""
    if not PACKED.exists():
        return 0
    n = 0
    with gzip.open(PACKED, "rt", encoding="utf-8") as fh:
        for line in fh:
            traj = json.loads(line)
            path = raw_path(traj["task"], traj["variation"], traj["split"])
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp")
                with gzip.open(tmp, "wt", encoding="utf-8") as out:
                    json.dump(traj, out)
                os.replace(tmp, path)
                n += 1
    return n


def extract(splits: list[str], workers: int) -> None:
    import multiprocessing as mp

    from tqdm import tqdm

    restored = unpack_missing()
    if restored:
        print(f"restored {restored} trajectories from {PACKED.name}; replaying the rest")

    todo = jobs(splits)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    chunks = [todo[i::workers] for i in range(workers)]
    procs = [ctx.Process(target=_worker, args=(c, queue), daemon=True) for c in chunks]
    for p in procs:
        p.start()
    errors, not_100 = [], []
    exits = 0
    with tqdm(total=len(todo), desc="gold replay", unit="var") as bar:
        while exits < workers:
            kind, task, var, val = queue.get()
            if kind == "exit":
                exits += 1
                continue
            bar.update(1)
            if kind == "error":
                errors.append((task, var, val))
                bar.write(f"ERROR {task} {var}: {val}")
            elif kind == "done" and val < 100:
                not_100.append((task, var, val))
    for p in procs:
        p.join()
    print(f"{len(todo)} variations; {len(errors)} errors; {len(not_100)} gold replays below 100: {not_100[:10]}")


def iter_raw(splits: Iterable[str]) -> Iterator[dict]:
    for split in splits:
        for path in sorted((RAW_DIR / split).glob("*.json.gz")):
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                yield json.load(fh)


def pack() -> None:
    """Bundle the per-variation files into one compressed, committed file plus a manifest."""
    PACKED.parent.mkdir(parents=True, exist_ok=True)
    counts: dict[str, dict[str, int]] = {}
    n = 0
    with gzip.open(PACKED, "wt", encoding="utf-8", compresslevel=9) as out:
        for traj in iter_raw(["train", "dev"]):
            out.write(json.dumps(traj) + "\n")
            c = counts.setdefault(traj["task"], {"train": 0, "dev": 0, "steps": 0, "below_100": 0})
            c[traj["split"]] += 1
            c["steps"] += len(traj["steps"])
            c["below_100"] += traj["final_score"] < 100
            n += 1
    manifest = {"file": PACKED.name, "trajectories": n, "per_task": counts,
                "simplifications": "teleportAction,openDoors,selfWateringFlowerPots,noElectricalAction "
                                   "(electrical tasks without noElectricalAction)",
                "caps": {"topics": TOPIC_CAPS, "tasks": TASK_CAPS, "dev_per_task": DEV_PER_TASK}}
    (PACKED.parent / "gold_manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"packed {n} trajectories into {PACKED} ({PACKED.stat().st_size / 1e6:.1f} MB)")


def load_trajectories(split: str) -> list[dict]:
    """From the committed pack (or the raw folder when it is newer/only there)."""
    if PACKED.exists():
        with gzip.open(PACKED, "rt", encoding="utf-8") as fh:
            return [t for t in map(json.loads, fh) if t["split"] == split]
    return [t for t in iter_raw([split])]


def trajectory_pairs(traj: dict, k: int = 10) -> list[tuple[str, str]]:
    """(Swift input, next action) for every step of a gold trajectory, in Swift's input format (docs/AGENT.md §2)."""
    state = SwiftState(task_description=traj["task_description"], score=traj["start_score"],
                       look=traj["start_look"], inventory=traj["start_inventory"], start_room=traj["start_room"])
    pairs = []
    for st in traj["steps"]:
        target = st["action"]
        if not is_noop(target, st["observation"]) and not target.startswith(DROP_TARGETS):
            pairs.append((swift_input(state, k), target))
        state.observe(target, st["observation"], st["reward"], st["room"], st["score"], st["look"], st["inventory"])
    return pairs


MAX_SAME_TARGET = 8  # per trajectory; see build_pairs


def build_pairs(split: str, k: int = 10, seed: int = 0, max_same_target: int = MAX_SAME_TARGET) -> list[dict]:
    """All pairs of a split, shuffled. At most `max_same_target` pairs per trajectory share one target
    (a random subset): the inclined-plane gold paths repeat `look at inclined plane 1` ~60 times each,
    which made a third of all pairs and of the training compute one action."""
    out = []
    rng = random.Random(seed)
    for traj in load_trajectories(split):
        if traj["final_score"] < 100:  # a gold path that failed on replay (2 of 2,481) teaches failure
            continue
        by_target: dict[str, list[str]] = {}
        for src, tgt in trajectory_pairs(traj, k):
            by_target.setdefault(tgt, []).append(src)
        for tgt, srcs in by_target.items():
            if max_same_target and len(srcs) > max_same_target:
                srcs = rng.sample(srcs, max_same_target)
            for src in srcs:
                out.append({"task": traj["task"], "variation": traj["variation"], "input": src, "target": tgt})
    random.Random(seed).shuffle(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("extract")
    ex.add_argument("--workers", type=int, default=2)
    ex.add_argument("--splits", nargs="*", default=["train", "dev"])
    sub.add_parser("pack")
    pr = sub.add_parser("pairs")
    pr.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    if args.cmd == "extract":
        extract(args.splits, args.workers)
    elif args.cmd == "pack":
        pack()
    else:
        for split in ("train", "dev"):
            pairs = build_pairs(split, args.k)
            path = PAIRS_DIR / f"pairs_{split}.jsonl.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(path, "wt", encoding="utf-8") as fh:
                for p in pairs:
                    fh.write(json.dumps(p) + "\n")
            print(f"{split}: {len(pairs)} pairs -> {path}")


if __name__ == "__main__":
    main()
