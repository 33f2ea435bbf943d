"""Which evaluations the Evaluate page offers, in which order (views/sources.py): the user's own first, newest
first, then the shipped ones, then the measurement records the repository commits under evals/."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from views import sources

ROOT = Path(__file__).resolve().parent.parent


def _evaluation(root: Path, name: str, mtime: float) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "evaluation.json").write_text(json.dumps({"spec": {}}))
    os.utime(d / "evaluation.json", (mtime, mtime))
    return d


def test_own_evaluations_newest_first_then_the_shipped_then_the_measurement_records(monkeypatch, tmp_path):
    evals, shipped = tmp_path / "evals", tmp_path / "shipped"
    now = time.time()
    record = _evaluation(evals, "record", now)  # the newest of all, but a committed record
    old, new = _evaluation(evals, "mine-old", now - 100), _evaluation(evals, "mine-new", now - 10)
    ship = _evaluation(shipped, "cpu", now - 1000)
    (evals / sources.RECORDS_FILE).write_text("# a comment\nrecord  # the journal's\n\n")
    monkeypatch.setenv("SWIFTSAGE_EVALS_DIR", str(evals))
    monkeypatch.setenv("SWIFTSAGE_SHIPPED_EVALS_DIR", str(shipped))
    assert sources.evaluation_dirs() == [new, old, ship, record]
    # without the records file every evaluation under evals/ is the user's own, newest first
    (evals / sources.RECORDS_FILE).unlink()
    assert sources.evaluation_dirs() == [record, new, old, ship]


def test_a_fresh_clone_has_no_evaluation_of_its_own_to_open_before_the_shipped_one(monkeypatch):
    """Every evaluation the repository commits under evals/ is a measurement record: a fresh clone's Evaluate page
    opens the shipped evaluation, not whichever record was checked out last."""
    monkeypatch.delenv("SWIFTSAGE_EVALS_DIR", raising=False)
    monkeypatch.delenv("SWIFTSAGE_SHIPPED_EVALS_DIR", raising=False)
    tracked = subprocess.run(["git", "ls-files", "evals"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    committed = {sources.real(str(ROOT / Path(f).parent)) for f in tracked if Path(f).name == "evaluation.json"}
    assert committed, "the repository commits its evaluation records under evals/"
    listed = sources.measurement_records()
    assert committed <= listed, f"committed evaluations missing from evals/{sources.RECORDS_FILE}: " \
                                f"{sorted(str(p) for p in committed - listed)}"
    # what a fresh clone holds: the committed folders only (a developer's own runs left aside)
    on_a_clone = [p for p in sources.evaluation_dirs()
                  if sources.real(str(p)) in committed or sources.inside(p, sources.shipped_evals_dir())]
    assert on_a_clone and sources.inside(on_a_clone[0], sources.shipped_evals_dir())


def test_the_list_says_which_evaluation_is_shipped_and_which_is_a_record(monkeypatch, tmp_path):
    evals, shipped = tmp_path / "evals", tmp_path / "shipped"
    record, mine = _evaluation(evals, "cpu", 1.0), _evaluation(evals, "mine", 2.0)
    ship = _evaluation(shipped, "cpu", 3.0)
    (evals / sources.RECORDS_FILE).write_text("cpu\n")
    monkeypatch.setenv("SWIFTSAGE_EVALS_DIR", str(evals))
    monkeypatch.setenv("SWIFTSAGE_SHIPPED_EVALS_DIR", str(shipped))
    assert [sources.evaluation_label(p) for p in (mine, ship, record)] == [
        "mine", "cpu (shipped)", "cpu (measurement record)"]
