"""Each variation's own task text ("boil lead", "the orange box in the living room"), not the task's general one.

ScienceWorld writes it only when a variation is loaded (about a second in a JVM), so it is collected once into
assets/variation_texts.json.gz by scripts/build_variation_texts.py: from the gold paths, from every recorded
trace, and for the rest by loading each variation. A variation missing from the table has no text here (None);
the sidebar then says so instead of showing another variation's objects."""
from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "assets" / "variation_texts.json.gz"


def key(task: str, variation: int) -> str:
    return f"{task}:{int(variation)}"


@functools.lru_cache(maxsize=1)
def table(path: str = str(TABLE)) -> dict[str, str]:
    p = Path(path)
    if not p.exists():
        return {}
    with gzip.open(p, "rt", encoding="utf-8") as fh:
        return dict(json.load(fh))


def variation_text(task: str, variation: int) -> str | None:
    """The variation's own task text, or None when the table does not hold it."""
    return table().get(key(task, variation))


def write_table(texts: dict[str, str], path: Path = TABLE) -> None:
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as fh:
        json.dump(dict(sorted(texts.items())), fh, ensure_ascii=False, separators=(",", ":"))
    tmp.replace(path)
    table.cache_clear()
