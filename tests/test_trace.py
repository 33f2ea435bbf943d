import json

import pytest

from agent_core.trace import (SCHEMA_VERSION, EpisodeHeader, EpisodeSummary, Gate1Decision, LLMCall,
                              StepRecord, SwiftCandidate, TraceError, TraceWriter, Trigger, read_episode)


def _header():
    return EpisodeHeader(task="boil", task_index=0, variation=3, split="test", task_description="boil water",
                         config={"preset": "baseline"}, models={"swift": "t5", "sage": "qwen"})


def _step(i, **kw):
    return StepRecord(step=i, action=f"a{i}", system="swift", observation=f"o{i}", look="l", inventory="inv",
                      score=float(i), reward=1.0, moves=i, done=False, failed=False, room="kitchen", **kw)


def test_round_trip(tmp_path):
    p = tmp_path / "ep.jsonl"
    w = TraceWriter(p, _header())
    rec = _step(1, trigger=Trigger("stuck", "stuck: the last 5 rewards sum to 0", {"rewards": [0, 0, 0, 0, 0]}),
                swift_candidates=[SwiftCandidate("go to kitchen", -0.1, True)],
                gate1=[Gate1Decision("sage", "go kitchen", "repaired", "go to kitchen", "missing 'to'")],
                llm_calls=[LLMCall("plan", "scripted", "m", "prompt", "Q1: ...")], plan={"Q1": "water"})
    w.append(rec)
    # each append is on disk before the next step: another reader sees it right away
    assert read_episode(p).steps == [rec]
    w.append(_step(2))
    w.close(EpisodeSummary(final_score=2, success=False, failed=False, steps=2, reason="stopped"))
    ep = read_episode(p)
    assert ep.header == w.header and ep.header.schema_version == SCHEMA_VERSION
    assert ep.steps[0] == rec and isinstance(ep.steps[0].trigger, Trigger)
    assert isinstance(ep.steps[0].gate1[0], Gate1Decision)
    assert [s.step for s in ep.steps] == [1, 2]
    assert ep.summary.reason == "stopped" and ep.truncated_tail is None


def test_refuses_to_overwrite(tmp_path):
    p = tmp_path / "ep.jsonl"
    TraceWriter(p, _header()).close()
    with pytest.raises(FileExistsError):
        TraceWriter(p, _header())


def test_truncated_last_line_is_reported_not_hidden(tmp_path):
    p = tmp_path / "ep.jsonl"
    w = TraceWriter(p, _header())
    w.append(_step(1))
    w.append(_step(2))
    w.close()
    # simulate a crash half-way through writing step 3
    line = json.dumps({"kind": "step", **_step(3).__dict__})
    with open(p, "a") as fh:
        fh.write(line[: len(line) // 2])
    ep = read_episode(p)
    assert [s.step for s in ep.steps] == [1, 2]
    assert ep.truncated_tail is not None and ep.truncated_tail[0] == 4
    assert ep.summary is None


def test_corrupted_line_names_file_and_line(tmp_path):
    p = tmp_path / "ep.jsonl"
    w = TraceWriter(p, _header())
    for i in (1, 2, 3):
        w.append(_step(i))
    w.close()
    lines = p.read_text().splitlines(keepends=True)
    lines[2] = "{garbage\n"
    p.write_text("".join(lines))
    with pytest.raises(TraceError) as e:
        read_episode(p)
    assert e.value.line == 3 and str(p) in str(e.value) and ":3:" in str(e.value)


def test_unknown_schema_is_rejected(tmp_path):
    p = tmp_path / "ep.jsonl"
    TraceWriter(p, _header()).close()
    obj = json.loads(p.read_text())
    obj["schema_version"] = 99
    p.write_text(json.dumps(obj) + "\n")
    with pytest.raises(TraceError, match="unknown schema version 99"):
        read_episode(p)


def test_step_without_header_and_missing_fields(tmp_path):
    p = tmp_path / "ep.jsonl"
    p.write_text(json.dumps({"kind": "step", "step": 1}) + "\n")
    with pytest.raises(TraceError, match=":1: step before the episode header"):
        read_episode(p)
    q = tmp_path / "ep2.jsonl"
    TraceWriter(q, _header()).close()
    with open(q, "a") as fh:
        fh.write(json.dumps({"kind": "step", "step": 1}) + "\n")
    with pytest.raises(TraceError, match=":2: corrupted step record"):
        read_episode(q)
