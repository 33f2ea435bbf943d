"""Does the game's text depend on how its JVM is started and read? The first test variation of every third task,
its first 12 gold actions in a fresh JVM, and a hash of the text after each (observation, look, inventory, valid
actions), under the adapter's way (no Java options, valid actions read by py4j's `list()`) run twice, and under
each alternative. A task whose hash differs from the adapter's would replay otherwise under that alternative.

    .venv/bin/python benchmarks/jvm_text.py [--offset 0] [--actions 12]

Behind docs/RELIABILITY.md's row "the JVM is driven otherwise than when an episode was recorded".
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

import argparse
import hashlib
import subprocess
import tempfile
from collections.abc import Callable

from agent_core.env import catalog


def _gateway(opts: list[str]):
    from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
    from scienceworld.scienceworld import BASEPATH, JAR_PATH

    port, proc = launch_gateway(classpath=JAR_PATH, die_on_exit=True, cwd=BASEPATH, return_proc=True, javaopts=opts)
    gw = JavaGateway(gateway_parameters=GatewayParameters(auto_field=True, port=port), java_process=proc)
    return gw, proc, gw.jvm.scienceworld.runtime.pythonapi.PythonInterface()


def _stop(gw, proc) -> None:
    gw.shutdown()
    proc.kill()
    proc.wait()


def by_list(gw, java_list) -> list[str]:
    return list(java_list)  # the adapter's read: a round trip per action


def by_join(gw, java_list) -> list[str]:
    joined = gw.jvm.java.lang.String.join("\n", java_list)
    return joined.split("\n") if joined else []


def text_hashes(tasks: list[str], n_actions: int, opts: list[str], read: Callable) -> dict[str, str]:
    out = {}
    for task in tasks:
        var = catalog().get(task).test[0]
        gw, proc, server = _gateway(opts)
        server.load(task, var, "", True)
        server.reset()
        gold = list(server.getGoldActionSequence())[:n_actions]
        _stop(gw, proc)
        gw, proc, server = _gateway(opts)  # a fresh JVM for the play, as the adapter's fresh_jvm
        server.load(task, var, "", False)
        server.reset()
        h = hashlib.sha1()
        for a in ["look around"] + gold:
            for text in (server.step(a), server.freeActionLook(), server.freeActionInventory(),
                         "\n".join(read(gw, server.getValidActionObjectCombinations()))):
                h.update(text.encode())
        out[task] = h.hexdigest()[:10]
        _stop(gw, proc)
    return out


def class_archive(path: Path, tasks: list[str]) -> None:
    """A class-data archive written by a JVM that played a little (Java 13+: -XX:ArchiveClassesAtExit)."""
    gw, proc, server = _gateway([f"-XX:ArchiveClassesAtExit={path}"])
    for task in tasks[:3]:
        server.load(task, 0, "", False)
        server.reset()
        server.step("look around")
        list(server.getValidActionObjectCombinations())
    gw.shutdown()
    proc.stdin.close()  # launched with die_on_exit: the JVM exits (and writes the archive) when its stdin closes
    proc.wait(timeout=120)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--offset", type=int, default=0, help="every third task from this one (0-2)")
    ap.add_argument("--actions", type=int, default=12)
    args = ap.parse_args()
    tasks = catalog().names()[args.offset::3]
    with tempfile.TemporaryDirectory() as tmp:
        jsa = Path(tmp) / "sw.jsa"
        class_archive(jsa, tasks)
        runs = {
            "adapter (no options, list())": ([], by_list),
            "adapter again": ([], by_list),
            "valid actions joined in the JVM": ([], by_join),
            "class-data archive": ([f"-XX:SharedArchiveFile={jsa}"], by_list),
            "class-data archive + SerialGC": ([f"-XX:SharedArchiveFile={jsa}", "-XX:+UseSerialGC"], by_list),
        }
        got = {name: text_hashes(tasks, args.actions, opts, read) for name, (opts, read) in runs.items()}
    ref = got["adapter (no options, list())"]
    print(f"java: {subprocess.run(['java', '-version'], capture_output=True, text=True).stderr.splitlines()[0]}")
    print(f"{len(tasks)} tasks (first test variation, {args.actions} gold actions each)")
    for name, hashes in got.items():
        diff = [t for t in tasks if hashes[t] != ref[t]]
        print(f"{name:34s} differs from the adapter's text in {len(diff)} of {len(tasks)}"
              + (f": {', '.join(diff)}" if diff else ""))


if __name__ == "__main__":
    main()
