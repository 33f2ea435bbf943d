"""Scoring math of the memory stream on hand-computed cases (docs/AGENT.md §7), and the LLM parsers."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from memory_store.config import MemoryConfig
from memory_store.reflection import parse_insights, parse_questions, parse_rating, rate_importance
from memory_store.scoring import (RetrievalResult, ScoredCandidate, cosine_relevance, minmax, normalize, rank,
                                  recency, score_all)


def test_recency_newest_is_highest_and_matches_the_definition():
    last_access = np.array([0.0, 50.0, 99.0, 100.0])
    rec = recency(100, last_access, 0.995)
    assert rec.tolist() == pytest.approx([0.995 ** 100, 0.995 ** 50, 0.995, 1.0])
    # newest (most recently accessed) highest: the original GA code inverts this
    assert list(np.argsort(-rec)) == [3, 2, 1, 0]


def test_recency_never_exceeds_one_when_the_clock_is_behind():
    assert recency(10, np.array([12.0]), 0.995).tolist() == [1.0]


def test_minmax_hand_computed_and_constant_column_is_half():
    assert minmax(np.array([2.0, 4.0, 10.0])).tolist() == pytest.approx([0.0, 0.25, 1.0])
    const = minmax(np.array([7.0, 7.0, 7.0]))
    assert const.tolist() == [0.5, 0.5, 0.5]
    assert not np.isnan(const).any()
    assert minmax(np.array([3.0])).tolist() == [0.5]
    assert normalize(np.array([1.0, 2.0]), 5.0, 5.0).tolist() == [0.5, 0.5]


def test_cosine_relevance_is_scale_free():
    e = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [1.0, 1.0]])
    assert cosine_relevance(e, np.array([5.0, 0.0])).tolist() == pytest.approx([1.0, 0.0, -1.0, math.sqrt(0.5)])


def _three():
    # A: new, mundane, off-topic. B: old, poignant, fairly relevant. C: middle-aged, middling, on-topic.
    now = 100.0
    last_access = np.array([100.0, 0.0, 60.0])
    importance = np.array([2.0, 10.0, 4.0])
    relevance = np.array([0.1, 0.5, 0.9])
    return now, last_access, importance, relevance


def test_scores_by_hand_and_weights_change_the_order_as_computed():
    now, la, imp, rel = _three()
    t = score_all(now, la, imp, rel, {"recency": 1, "importance": 1, "relevance": 1}, 0.995)
    r_b, r_c = 0.995 ** 100, 0.995 ** 40
    rec_n = [1.0, 0.0, (r_c - r_b) / (1 - r_b)]
    assert t.recency_n.tolist() == pytest.approx(rec_n)
    assert t.importance_n.tolist() == pytest.approx([0.0, 1.0, 0.25])
    assert t.relevance_n.tolist() == pytest.approx([0.0, 0.5, 1.0])
    # A = 1 + 0 + 0 = 1; B = 0 + 1 + 0.5 = 1.5; C = 0.6725.. + 0.25 + 1 = 1.9225..
    assert t.score.tolist() == pytest.approx([1.0, 1.5, rec_n[2] + 1.25])
    assert list(rank(t.score)) == [2, 1, 0]  # C, B, A
    # Recency weighted 3, relevance 0: A = 3, B = 1, C = 3 * 0.6725.. + 0.25 = 2.2677..
    t2 = score_all(now, la, imp, rel, {"recency": 3, "importance": 1, "relevance": 0}, 0.995)
    assert t2.score.tolist() == pytest.approx([3.0, 1.0, 3 * rec_n[2] + 0.25])
    assert list(rank(t2.score)) == [0, 2, 1]  # A, C, B
    # Importance only: B, C, A
    t3 = score_all(now, la, imp, rel, {"recency": 0, "importance": 1, "relevance": 0}, 0.995)
    assert list(rank(t3.score)) == [1, 2, 0]


def test_ties_go_to_the_newer_memory_and_negative_weights_are_refused():
    assert list(rank(np.array([1.0, 2.0, 2.0]), np.array([5, 1, 9]))) == [2, 1, 0]
    now, la, imp, rel = _three()
    with pytest.raises(ValueError):
        score_all(now, la, imp, rel, {"recency": -1, "importance": 1, "relevance": 1}, 0.995)


def _result() -> RetrievalResult:
    now, la, imp, rel = _three()
    t = score_all(now, la, imp, rel, {"recency": 1, "importance": 1, "relevance": 1}, 0.995)
    cands = [ScoredCandidate(id=f"m{i:06d}", description=d, type="observation", tag="", importance=float(imp[i]),
                             recency=float(t.recency[i]), relevance=float(rel[i]), importance_n=float(t.importance_n[i]),
                             recency_n=float(t.recency_n[i]), relevance_n=float(t.relevance_n[i]),
                             score=float(t.score[i]), last_access=float(la[i]), created=float(la[i]), seq=i)
             for i, d in enumerate(["A", "B", "C"])]
    order = rank(t.score)
    cands = [cands[i] for i in order]
    for r, c in enumerate(cands, 1):
        c.rank = r
    return RetrievalResult(query="q", trigger="T4", now=now, weights={"recency": 1.0, "importance": 1.0,
                           "relevance": 1.0}, candidates=cands, top_ids=[c.id for c in cands], k=3)


def test_retrieval_result_round_trips_through_json_and_reranks():
    res = _result()
    back = RetrievalResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert back == res
    assert [c.description for c in back.top] == ["C", "B", "A"]
    assert [c.description for c in back.rerank({"recency": 3, "importance": 1, "relevance": 0})] == ["A", "C", "B"]
    assert [c.rank for c in back.rerank({"recency": 0, "importance": 1, "relevance": 0}, k=2)] == [1, 2]


def test_parse_rating_and_rate_importance_with_a_scripted_llm():
    assert parse_rating("Rating: 7") == 7
    assert parse_rating("I would say 8/10.") == 8
    assert parse_rating("no idea") is None
    cfg = MemoryConfig()
    assert rate_importance("found the thermometer", lambda p: " 9").value == 9
    high = rate_importance("x", lambda p: "15")
    assert high.value == 10 and high.parsed == 15 and high.error is None
    assert rate_importance("x", lambda p: "0").value == 1

    def broken(prompt: str) -> str:
        raise TimeoutError("backend timed out")

    failed = rate_importance("x", broken, cfg)
    assert failed.value == cfg.default_importance and "TimeoutError" in failed.error
    assert failed.call.error and failed.call.prompt.count("Memory: x") == 1
    garbled = rate_importance("x", lambda p: "very important!")
    assert garbled.value == cfg.default_importance and garbled.error


def test_parse_questions_and_insights():
    qs = parse_questions("Here are questions:\n1. Where is the water?\n2) How does heat work?\n- What failed?\n"
                         "4. Extra?", 3)
    assert qs == ["Where is the water?", "How does heat work?", "What failed?"]
    ids = ["m000005", "m000007", "m000009"]
    good, rejected = parse_insights(
        "1. Water boils on an active stove (because of 1, 3)\n"
        "2. The sink fills containers (because of 2, 2)\n"
        "A claim without evidence\n"
        "Nonsense citation (because of 12)\n"
        "Direct ids work too (m000007)", ids)
    assert good == [("Water boils on an active stove", ["m000005", "m000009"]),
                    ("The sink fills containers", ["m000007"]), ("Direct ids work too", ["m000007"])]
    assert rejected == ["A claim without evidence", "Nonsense citation (because of 12)"]


def test_config_round_trip_and_env_default(monkeypatch):
    monkeypatch.setenv("SWIFTSAGE_MEMORY_DIR", "/tmp/somewhere")
    cfg = MemoryConfig()
    assert cfg.persist_dir == "/tmp/somewhere"
    assert (cfg.recency_decay, cfg.reflection_threshold, cfg.reflection_recent_window,
            cfg.reflection_questions, cfg.embedding_threads) == (0.995, 150, 100, 3, 1)
    assert MemoryConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError):
        MemoryConfig.from_dict({"nope": 1})
    monkeypatch.delenv("SWIFTSAGE_MEMORY_DIR")
    assert MemoryConfig().persist_dir == "runs/memory"
