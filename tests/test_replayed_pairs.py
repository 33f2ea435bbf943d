"""benchmarks/replayed_pairs.py: which pairs played again may replace the shipped ones whole."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("replayed_pairs", ROOT / "benchmarks" / "replayed_pairs.py")
rp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rp)

AVX512 = {"cpu": "AMD EPYC", "isa": "avx512+bf16", "cores": 2}
AVX2 = {"cpu": "AMD EPYC", "isa": "avx2", "cores": 2}


def _ep(preset: str, task: str, v: int, machine: dict | None) -> dict:
    return {"preset": preset, "task": task, "variation": v, "final": 10.0, "trace": f"{task}-v{v}-{preset}.jsonl",
            **({"machine": machine} if machine else {})}


def test_a_pair_is_whole_only_when_every_preset_was_played_again_on_one_kind_of_machine():
    presets = {"baseline", "srm"}
    res = {"episodes": [
        _ep("baseline", "boil", 21, AVX2), _ep("srm", "boil", 21, AVX512),          # two kinds of machine
        _ep("baseline", "melt", 21, AVX512), _ep("srm", "melt", 21, {**AVX512, "cores": 16}),  # cores don't matter
        _ep("baseline", "freeze", 21, AVX512),                                      # one preset only
        _ep("baseline", "grow-plant", 93, None), _ep("srm", "grow-plant", 93, None),  # machine not recorded
    ]}
    eps, whole, mixed, partial = rp.sort_pairs(presets, res)
    assert whole == {("melt", 21)}
    assert mixed == [("boil", 21), ("grow-plant", 93)]
    assert partial == [("freeze", 21)]
    assert set(eps[("boil", 21)]) == presets
