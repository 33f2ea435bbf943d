"""Swift's data pipeline: the committed pack restores raw files for a resumed extraction; pair caps."""
import gzip
import json
from collections import Counter

import agent_core.swift.data as data


def test_unpack_restores_the_committed_trajectories_once(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "RAW_DIR", tmp_path)
    with gzip.open(data.PACKED, "rt", encoding="utf-8") as fh:
        packed = [json.loads(line) for line in fh]
    assert data.unpack_missing() == len(packed)
    assert data.unpack_missing() == 0  # already there: nothing rewritten
    first = packed[0]
    path = data.raw_path(first["task"], first["variation"], first["split"])
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        assert json.load(fh) == first
    assert sorted(p.name for p in tmp_path.rglob("*.tmp")) == []


def test_pairs_cap_repeated_targets_per_trajectory_and_never_use_test():
    pairs = data.build_pairs("train")
    per_traj = Counter((p["task"], p["variation"], p["target"]) for p in pairs)
    assert max(per_traj.values()) <= data.MAX_SAME_TARGET
    assert not any(p["target"].startswith(("look around", "close door")) for p in pairs)
    assert not any("already open" in p["input"] for p in pairs)
    test_vars = {(t.name, v) for t in data.catalog().tasks for v in t.test}
    assert not any((p["task"], p["variation"]) in test_vars for p in pairs)
