"""benchmarks/record_diff.py: how much of the play changed between two records of the same episodes."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "assets" / "evaluations" / "cpu-30x2x30" / "traces"
_spec = importlib.util.spec_from_file_location("record_diff", ROOT / "benchmarks" / "record_diff.py")
rd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rd)


def test_an_episode_that_played_other_actions_is_counted_with_its_machine_and_the_llm_calls_are_summed(tmp_path):
    old, new = tmp_path / "old" / "traces" / "baseline", tmp_path / "new" / "traces" / "baseline"
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    for v in (21, 22):
        shutil.copy(SHIPPED / "baseline" / f"boil-v{v}-baseline.jsonl", new)
    shutil.copy(SHIPPED / "baseline" / "boil-v21-baseline.jsonl", old)
    # the old record's v22 is another episode under that name: it parts at its first step (another room)
    shutil.copy(SHIPPED / "baseline" / "melt-v21-baseline.jsonl", old / "boil-v22-baseline.jsonl")
    shutil.copy(SHIPPED / "baseline" / "melt-v22-baseline.jsonl", new)  # only in the new record: not compared
    d = rd.compare(tmp_path / "old", tmp_path / "new", "baseline")
    assert (d["episodes"], d["same_actions"]) == (2, 1)
    v22 = rd.read_episode(new / "boil-v22-baseline.jsonl")
    assert d["same_final"] == 1  # boil v22 ended at 3, the melt episode in its place at 2
    assert dict(d["machines"]) == {rd.describe_machine(v22.header.machine): 1}
    calls = [c for p in ("boil-v21", "boil-v22") for s in rd.read_episode(new / f"{p}-baseline.jsonl").steps
             for c in s.llm_calls]
    assert d["calls"] == len(calls) > 0 and d["failed"] == 0
    assert d["slowest"] == max(c.latency_s for c in calls)
