"""The memory stream on a real Chroma store in tmp_path with the real all-MiniLM-L6-v2 model."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from memory_store import MemoryConfig, MemoryStream, RetrievalResult, seed_demo
from memory_store.scoring import rank, score_all

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.model
def test_add_retrieve_breakdown_and_access_update(tmp_path):
    s = MemoryStream(MemoryConfig(), path=tmp_path / "mem")
    a = s.add("The stove in the kitchen is turned off.", now=1, importance=3, task="boil", episode=0)
    b = s.add("Water in the metal pot boiled on the stove: task completed.", now=5, importance=10, task="boil",
              tag="success")
    c = s.add("The greenhouse has three flower pots.", now=9, importance=2, type="observation", task="grow")
    d = s.add("Plan: fill the pot at the sink, put it on the stove, activate the stove.", now=10, importance=7,
              type="plan", task="boil")
    assert [m.id for m in s.memories()] == [a.id, b.id, c.id, d.id]
    assert s.latest_time == 10

    res = s.retrieve("how do I boil water on the stove", now=20, k=2, trigger="T4")
    assert res.trigger == "T4" and res.eligible == 4 and res.examined == 4 and len(res.top_ids) == 2
    for cand in res.candidates:  # the breakdown adds up
        assert cand.score == pytest.approx(cand.recency_n + cand.importance_n + cand.relevance_n)
        assert 0 <= cand.recency_n <= 1 and 0 <= cand.importance_n <= 1 and 0 <= cand.relevance_n <= 1
        assert cand.recency == pytest.approx(0.995 ** (20 - cand.last_access))
    assert [x.score for x in res.candidates] == sorted((x.score for x in res.candidates), reverse=True)
    assert res.top_ids[0] == b.id  # poignant and on-topic
    assert [x.rank for x in res.candidates] == [1, 2, None, None]
    # retrieval updated the last access of the top-k only
    assert s.get(res.top_ids[0]).last_access == 20 and s.get(res.top_ids[1]).last_access == 20
    assert s.get(c.id).last_access == 9
    # JSON-safe
    assert RetrievalResult.from_dict(json.loads(json.dumps(res.to_dict()))).top_ids == res.top_ids

    # newest has the highest recency
    res2 = s.retrieve("anything", now=21, k=4, update_access=False)
    by_id = {x.id: x for x in res2.candidates}
    assert by_id[res.top_ids[0]].recency_n == 1.0 and by_id[a.id].recency_n == 0.0

    # filters: type, tag, task; unknown values give an empty result, not an error
    assert s.retrieve("stove", now=21, types="plan", update_access=False).top_ids == [d.id]
    assert s.retrieve("stove", now=21, tags="success", update_access=False).top_ids == [b.id]
    assert set(s.retrieve("stove", now=21, task="boil", k=5, update_access=False).top_ids) == {a.id, b.id, d.id}
    assert s.retrieve("stove", now=21, task="nope", update_access=False).top_ids == []
    with pytest.raises(ValueError):
        s.retrieve("stove", now=21, types="dream")
    # a single eligible memory: constant columns normalize to 0.5, never NaN
    only = s.retrieve("stove", now=21, types="plan", update_access=False).candidates[0]
    assert (only.recency_n, only.importance_n, only.relevance_n) == (0.5, 0.5, 0.5)
    # importance is clamped; a missing rating records why the default stands in
    e = s.add("x", now=22, importance=42)
    f = s.add("y", now=22)
    assert e.importance == 10 and f.importance == s.config.default_importance and f.importance_error


@pytest.mark.model
def test_demo_store_is_semantically_sensible(tmp_path):
    s = MemoryStream(MemoryConfig(), path=tmp_path / "demo")
    mems = seed_demo(s)
    assert len(mems) >= 40 and {m.type for m in mems} == {"observation", "plan", "reflection"}
    refl = [m for m in mems if m.type == "reflection"]
    assert all(m.evidence_ids and m.depth >= 1 for m in refl) and max(m.depth for m in refl) == 2
    res = s.retrieve("the light bulb lit up, so the fork conducts electricity", now=70, k=3, update_access=False)
    assert any("bulb" in c.description for c in res.top)
    assert max(res.candidates, key=lambda c: c.relevance).relevance_n == 1.0


_WRITER = textwrap.dedent("""
    import json, sys
    import numpy as np
    from memory_store import MemoryConfig, MemoryStream
    s = MemoryStream(MemoryConfig(), path=sys.argv[1])
    rng = np.random.default_rng(7)
    emb = rng.normal(size=(30, 384)).astype(np.float32)
    mems = s.add_many([dict(description=f"memory {i}", now=i, importance=1 + i % 10, type="observation",
                            tag="near-miss" if i % 3 == 0 else "", task="boil", episode=str(i // 10))
                       for i in range(30)], emb)
    refl = s.add("insight", now=31, type="reflection", importance=8, evidence_ids=[mems[0].id, mems[1].id],
                 embedding=emb[0] + emb[1])
    res = s.retrieve("q", now=40, k=3, query_embedding=emb[5])
    s.close()
    print(json.dumps({"top": res.top_ids, "emb": emb.tolist()}))
""")


def test_persistence_across_a_process_restart(tmp_path):
    path = tmp_path / "persist"
    out = subprocess.run([sys.executable, "-c", _WRITER, str(path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    written = json.loads(out.stdout.strip().splitlines()[-1])
    s = MemoryStream(MemoryConfig(), path=path)  # a new process's view: loaded from disk
    assert len(s) == 31
    mems = s.memories()
    assert [m.seq for m in mems] == list(range(31)) and mems[7].description == "memory 7"
    assert mems[9].tag == "near-miss" and mems[9].importance == 10 and mems[25].episode == "2"
    assert mems[30].type == "reflection" and mems[30].evidence_ids == [mems[0].id, mems[1].id] and mems[30].depth == 1
    emb = np.asarray(written["emb"], dtype=np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    assert np.allclose(s.embeddings()[:30], emb, atol=1e-6)
    for mid in written["top"]:  # the retrieval's last-access update was persisted
        assert s.get(mid).last_access == 40
    assert sum(m.last_access == 40 for m in mems) == 3
    # the reopened store keeps numbering and retrieving
    new = s.add("after restart", now=41, importance=5, embedding=emb[3])
    assert new.id == "m000031"
    assert s.retrieve("q", now=42, k=1, query_embedding=emb[3]).top_ids == [new.id]


def test_reopen_reads_the_snapshot_and_never_a_stale_one(tmp_path):
    """A closed store reopens from its mirror snapshot with exactly what Chroma holds (memories, vectors, access
    times, the same retrieval); a store written after its snapshot, or with a damaged one, is read from Chroma."""
    path = tmp_path / "snap"
    rng = np.random.default_rng(3)
    emb = rng.normal(size=(40, 384)).astype(np.float32)
    s = MemoryStream(MemoryConfig(), path=path)
    s.add_many([dict(description=f"memory {i}", now=i, importance=1 + i % 10, type=("observation", "plan")[i % 2],
                     task=f"t{i % 3}", tag=("", "success")[i % 2], episode=str(i % 4)) for i in range(40)], emb)
    for t in range(3):
        s.retrieve("", now=50 + t, k=3, query_embedding=emb[t])
    s.close()
    snap = MemoryStream(MemoryConfig(), path=path)
    assert snap.loaded_from == "snapshot"
    (path / "mirror" / "token").unlink()
    ref = MemoryStream(MemoryConfig(), path=path)
    assert ref.loaded_from == "chroma"
    def fields(s):  # created_wall is display-only, and Chroma may keep fewer of its digits
        return [{**m.to_dict(), "created_wall": None} for m in s.memories()]
    assert fields(snap) == fields(ref)
    assert np.allclose([m.created_wall for m in snap.memories()], [m.created_wall for m in ref.memories()], atol=1e-3)
    # exactly: a bulk write's vectors are read back from Chroma (which may round one in its last bit) before the
    # snapshot is written, so a run resumed from Chroma's rows scores as one reopened from the snapshot
    assert np.array_equal(snap.embeddings(), ref.embeddings())
    for q in emb[:5]:
        a = snap.retrieve("", now=60, k=5, query_embedding=q, types="plan", update_access=False)
        b = ref.retrieve("", now=60, k=5, query_embedding=q, types="plan", update_access=False)
        assert a.top_ids == b.top_ids and [c.score for c in a.candidates] == [c.score for c in b.candidates]
    ref.close()  # nothing changed: no snapshot written, the token stays gone
    assert not (path / "mirror" / "token").exists()
    snap.add("written after the snapshot", now=70, importance=5, embedding=emb[0])
    snap.close()
    again = MemoryStream(MemoryConfig(), path=path)
    assert again.loaded_from == "snapshot" and len(again) == 41
    again.add("not closed", now=71, importance=5, embedding=emb[1])  # e.g. the process died here
    late = MemoryStream(MemoryConfig(), path=path)
    assert late.loaded_from == "chroma" and len(late) == 42 and late.recent(1)[0].description == "not closed"
    late.add("closed", now=72, importance=5, embedding=emb[2])
    late.close()
    (path / "mirror" / "objects.pkl").write_bytes(b"not a pickle")
    broken = MemoryStream(MemoryConfig(), path=path)
    assert broken.loaded_from == "chroma" and len(broken) == 43
    # a store removed under a live stream (an evaluation's scratch copy): closing it recreates nothing
    import shutil

    shutil.rmtree(path)
    assert broken.save_snapshot() is False and not path.exists()


def test_refresh_sees_another_writer(tmp_path):
    path = tmp_path / "shared"
    writer = MemoryStream(MemoryConfig(), path=path)
    reader = MemoryStream(MemoryConfig(), path=path)
    writer.add("a new memory", now=1, importance=4, embedding=np.ones(384))
    assert len(reader) == 0
    assert reader.refresh() and len(reader) == 1 and reader.memories()[0].description == "a new memory"
    assert not reader.refresh()


def test_a_reload_while_the_agent_holds_its_access_times_writes_nothing(tmp_path):
    """The Memory explorer's "Reload from disk" on the store the agent is stepping on: the access times the agent
    holds until its step is recorded are neither written nor dropped."""
    from memory_store import close_stream, open_stream

    stream = open_stream(MemoryConfig(persist_dir=str(tmp_path / "s")))
    stream.add("a memory", now=1, importance=4, embedding=np.ones(384))
    stream.hold_access = True  # the agent mid-step
    stream.retrieve("a memory", now=5, k=1, query_embedding=np.ones(384))
    on_disk = lambda: stream._collection.get(include=["metadatas"])["metadatas"][0]["last_access"]  # noqa: E731
    assert on_disk() == 1 and stream._pending_access
    assert not stream.refresh(force=True)  # refused: nothing written, nothing reloaded
    assert on_disk() == 1 and stream._pending_access
    stream.hold_access = False
    assert stream.refresh(force=True) and on_disk() == 5  # after the step: written, then reloaded
    close_stream(stream)
    assert open_stream(MemoryConfig(persist_dir=str(tmp_path / "s"))) is not stream  # closed and forgotten


def _exhaustive_top(s: MemoryStream, q: np.ndarray, now: float, k: int, weights: dict, types=None):
    """Reference: score every eligible memory with the pure functions, independently of the stream."""
    mems = s.memories()
    emb = s.embeddings().astype(np.float64)
    keep = [i for i, m in enumerate(mems) if types is None or m.type in types]
    rel = emb[keep] @ (q / np.linalg.norm(q))
    t = score_all(now, np.array([mems[i].last_access for i in keep]), np.array([mems[i].importance for i in keep]),
                  rel, weights, s.config.recency_decay)
    order = rank(t.score, np.array([mems[i].seq for i in keep]))[:k]
    return [mems[keep[j]].id for j in order], t.score[order]


def _assert_same_top(got_ids, got_scores, exp_ids, exp_scores, tol=1e-5):
    assert len(got_ids) == len(exp_ids)
    assert np.allclose(got_scores, exp_scores, atol=tol)
    # identical ids, except within groups of (numerically) tied scores at the cut
    cut = exp_scores[-1]
    assert [i for i, sc in zip(got_ids, got_scores) if sc > cut + tol] == \
        [i for i, sc in zip(exp_ids, exp_scores) if sc > cut + tol]


@pytest.mark.parametrize("indexed", [True, False], ids=["recency-index", "numpy-passes"])
@pytest.mark.parametrize("seed", range(12))
def test_preselection_equals_exhaustive_scoring(tmp_path, seed, indexed):
    """Property-style: random stores, clocks, weights, k and filters; pre-selection on (pools of 4 and 8,
    no exact scan) must return the exhaustive top-k with the same scores, with list A from the recency index
    (touched and appended rows merged in, an access set back) and from numpy passes alike."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 260))
    cfg = MemoryConfig(exact_scan_max=0, candidate_pool=4, candidate_pool_growth=2, knn_fetch=8,
                       max_knn_fetch=100_000, recency_index=indexed)
    s = MemoryStream(cfg, path=tmp_path / f"p{seed}")
    centers = rng.normal(size=(5, 384))
    emb = centers[rng.integers(0, 5, n)] + 0.6 * rng.normal(size=(n, 384))  # clustered, like real text
    created = np.sort(rng.integers(0, 400, n)).astype(float)
    items = [dict(description=f"memory {i}", now=created[i], importance=int(rng.integers(1, 11)),
                  type=str(rng.choice(["observation", "observation", "plan", "reflection"])),
                  last_access=created[i] + float(rng.integers(0, 50)) * (rng.random() < 0.3)) for i in range(n)]
    s.add_many(items, emb)
    methods, rounds = set(), []
    for trial in range(6):
        q = centers[rng.integers(0, 5)] + rng.normal(size=384)
        now = float(created.max() + rng.integers(0, 100))
        weights = {p: float(rng.choice([0.0, 0.5, 1.0, 1.0, 2.0, 3.0])) for p in ("recency", "importance",
                                                                                  "relevance")}
        k = int(rng.integers(1, 11))
        types = None if trial % 2 == 0 else list(rng.choice(["observation", "plan", "reflection"],
                                                            size=int(rng.integers(1, 3)), replace=False))
        got = s.retrieve("unused", now, k, weights=weights, types=types, query_embedding=q, update_access=False)
        exp_ids, exp_scores = _exhaustive_top(s, q, now, k, weights, types)
        _assert_same_top(got.top_ids, [c.score for c in got.top], exp_ids, exp_scores)
        full = s.retrieve("unused", now, k, weights=weights, types=types, query_embedding=q, update_access=False,
                          exhaustive=True)
        _assert_same_top(got.top_ids, [c.score for c in got.top], full.top_ids, [c.score for c in full.top])
        methods.add(got.method)
        rounds.append(got.rounds)
        # the access update happens after scoring: now let one retrieval refresh recency for the next trial
        s.retrieve("unused", now, 2, query_embedding=q)
        if trial == 2:  # new memories after the index was built, and one access time set back
            more = [dict(description=f"late {i}", now=now, importance=int(rng.integers(1, 11)), type="plan")
                    for i in range(3)]
            s.add_many(more, centers[rng.integers(0, 5, 3)] + 0.6 * rng.normal(size=(3, 384)))
            s.set_access({s.memories()[0].id: 0.0})
            created = np.append(created, [now] * 3)
    # the bound held before a full scan was needed; with the index, its first round nearly always settles it
    assert methods <= {"indexed", "preselect"} and ("indexed" in methods) == indexed


def test_a_retrieval_can_leave_out_whole_episodes(tmp_path):
    """exclude_episode: none of those episodes' memories is a candidate, and the normalization set shrinks with it."""
    rng = np.random.default_rng(5)
    emb = rng.normal(size=(12, 384)).astype(np.float32)
    s = MemoryStream(MemoryConfig(), path=tmp_path / "x")
    s.add_many([dict(description=f"m{i}", now=i, importance=1 + i % 5, task="boil", episode=("a", "b", "c")[i % 3])
                for i in range(12)], emb)
    everyone = s.retrieve("", now=20, k=12, query_embedding=emb[0], update_access=False)
    assert {c.episode for c in everyone.candidates} == {"a", "b", "c"}
    left = s.retrieve("", now=20, k=12, query_embedding=emb[0], update_access=False, exclude_episode="a")
    assert {c.episode for c in left.candidates} == {"b", "c"} and left.eligible == 8
    assert left.filters["exclude_episode"] == ["a"]
    both = s.retrieve("", now=20, k=12, query_embedding=emb[0], update_access=False, exclude_episode=["a", "c"],
                      task="boil")
    assert {c.episode for c in both.candidates} == {"b"}
    unknown = s.retrieve("", now=20, k=12, query_embedding=emb[0], update_access=False, exclude_episode="zzz")
    assert unknown.eligible == 12
    s.close()
