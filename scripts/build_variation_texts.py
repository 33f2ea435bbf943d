"""Collect each ScienceWorld variation's own task text into assets/variation_texts.json.gz (see
agent_core/variation_texts.py). Resumable: what the table holds is kept, and it is written every 50 variations.

    .venv/bin/python scripts/build_variation_texts.py                     # gold paths + recorded traces only
    .venv/bin/python scripts/build_variation_texts.py --jvm test dev      # and load every missing test/dev variation
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_core.gold import GOLD_PACK  # noqa: E402
from agent_core.trace import list_traces  # noqa: E402
from agent_core.variation_texts import TABLE, key, table, write_table  # noqa: E402


def from_gold(texts: dict[str, str]) -> int:
    n = 0
    with gzip.open(GOLD_PACK, "rt", encoding="utf-8") as fh:
        for line in fh:
            t = json.loads(line)
            n += texts.setdefault(key(t["task"], t["variation"]), t["task_description"]) == t["task_description"]
    return n


def from_traces(texts: dict[str, str], roots: list[Path]) -> int:
    n = 0
    for p in list_traces(*[r for r in roots if r.exists()]):
        try:
            with p.open(encoding="utf-8") as fh:
                h = json.loads(fh.readline())  # the header is the first line
        except (OSError, ValueError):  # a broken trace teaches nothing here
            continue
        if h.get("task_description") and h.get("task") and h.get("variation") is not None:
            texts.setdefault(key(h["task"], h["variation"]), h["task_description"])
            n += 1
    return n


def from_jvm(texts: dict[str, str], splits: list[str]) -> int:
    from tqdm import tqdm

    from agent_core.env import ScienceWorld, catalog

    cat = catalog()
    todo = [(name, v) for name in cat.names() for s in splits for v in cat.get(name).variations(s)
            if key(name, v) not in texts]
    n = 0
    with ScienceWorld() as env:
        for name, v in tqdm(todo, desc="variations"):
            env.reset(name, v)
            texts[key(name, v)] = env._task_desc
            n += 1
            if n % 50 == 0:
                write_table(texts)
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jvm", nargs="*", default=[], metavar="SPLIT", help="load the missing variations of these splits")
    args = ap.parse_args()
    texts = dict(table())
    before = len(texts)
    g = from_gold(texts)
    t = from_traces(texts, [ROOT / "assets", ROOT / "evals", ROOT / "runs"])
    write_table(texts)
    j = from_jvm(texts, args.jvm) if args.jvm else 0
    write_table(texts)
    print(f"{len(texts)} variations in {TABLE.relative_to(ROOT)} ({before} before; gold {g}, traces {t}, JVM {j})")


if __name__ == "__main__":
    main()
