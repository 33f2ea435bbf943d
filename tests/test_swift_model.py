"""Swift's model: training lowers the loss; the shipped checkpoint ranks candidates on a real state."""
from __future__ import annotations

from pathlib import Path

import pytest

from agent_core.actions import ROOMS
from agent_core.env import catalog
from agent_core.swift.data import build_pairs, load_trajectories, trajectory_pairs
from agent_core.swift.format import SwiftState, swift_input
from agent_core.swift.model import DEFAULT_DIR, SwiftModel, build_t5, train_tokenizer
from agent_core.swift.architectures import RowMajorLinear

pytestmark = pytest.mark.xdist_group("test_swift_model")


def test_gold_data_is_train_and_dev_only():
    train = load_trajectories("train")
    assert len(train) > 100 and {t["split"] for t in train} == {"train"}
    test_vars = {(t.name, v) for t in catalog().tasks for v in t.test}
    assert not {(t["task"], t["variation"]) for t in train} & test_vars
    assert all(t["final_score"] == 100 for t in train[:50])


@pytest.mark.model
def test_a_few_training_steps_lower_the_loss(tmp_path):
    import torch

    torch.manual_seed(0)
    pairs = [p for t in load_trajectories("train")[:6] for p in trajectory_pairs(t)][:32]
    tok = train_tokenizer([a for a, _ in pairs] + [b for _, b in pairs], 600, tmp_path / "tok")
    model = build_t5(len(tok), tok.pad_token_id, tok.eos_token_id, d_model=64, layers=2, heads=2, d_ff=128)
    enc = tok([a for a, _ in pairs], return_tensors="pt", padding=True, truncation=True, max_length=256)
    lab = tok([b for _, b in pairs], return_tensors="pt", padding=True)["input_ids"]
    lab[lab == tok.pad_token_id] = -100
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def loss() -> torch.Tensor:
        return model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=lab).loss

    model.eval()
    with torch.no_grad():
        before = float(loss())
    model.train()
    for _ in range(25):
        opt.zero_grad()
        loss().backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        after = float(loss())
    assert after < before * 0.7, (before, after)


def _first_state(env, info):
    """The valid actions and Swift's state at the start of the task's first test variation."""
    obs = env.reset(info.name, info.test[0], split="test")
    state = SwiftState(task_description=obs.task_description, score=obs.score, look=obs.look,
                       inventory=obs.inventory, start_room=obs.room)
    return env.valid_actions(), state


@pytest.fixture(scope="module")
def shipped():
    return SwiftModel(DEFAULT_DIR, threads=1)


@pytest.mark.jvm
@pytest.mark.model
def test_shipped_checkpoint_ranks_candidates_and_valid_actions(shipped, sw_env):
    assert (Path(DEFAULT_DIR) / "training_summary.json").exists()
    info = catalog().get("find-living-thing")
    valid, state = _first_state(sw_env, info)
    prop = shipped.propose(swift_input(state), valid, n=5)
    scores = [s for _, s in prop.candidates]
    assert len(prop.candidates) >= 2 and scores == sorted(scores, reverse=True)
    assert prop.top1 == prop.candidates[0][0]
    assert prop.valid_ranked and all(a in valid for a, _ in prop.valid_ranked)
    assert prop.action == prop.valid_ranked[0][0] and prop.action in valid
    vs = [s for _, s in prop.valid_ranked]
    assert vs == sorted(vs, reverse=True) and prop.latency_s > 0
    # the valid ranking is a real preference: it follows the model's own scores of those actions
    top_valid = [a for a, _ in prop.valid_ranked]
    assert len(set(top_valid)) == len(top_valid)
    # the per-step encoding is reused by both beam searches and must come back unchanged
    enc = shipped._encode(swift_input(state))
    first = shipped.rank_valid("", valid, 5, enc=enc)
    assert enc["encoder_outputs"].last_hidden_state.shape[0] == 1
    assert shipped.rank_valid("", valid, 5, enc=enc) == first
    # the same ranking as propose's batched search (5 rows here, 10 there: the last bits of a score may differ)
    assert [a for a, _ in first] == top_valid
    assert all(abs(x - y) < 1e-5 for (_, x), (_, y) in zip(first, prop.valid_ranked))


@pytest.mark.model
def test_rank_valid_with_one_or_no_valid_action(shipped):
    text = "Task: Your task is to find a living thing.; Time: 0; Score: 0; Action history: []; Current room: " \
           "This room is called the kitchen.; Inventory: nothing; Visited rooms: {kitchen}"
    assert shipped.rank_valid(text, []) == []
    only = shipped.rank_valid(text, ["look around"])
    assert [a for a, _ in only] == ["look around"]


@pytest.mark.jvm
@pytest.mark.model
def test_full_sequence_scores_match_the_beam_and_rank_every_focus_target(shipped, sw_env):
    """score_actions is the beam's own scoring done for any list at once; focus_scores turns the scores of
    every valid focus (rooms left out) into probabilities among the targets."""
    from agent_core.swift.model import target_ids

    info = catalog().get("find-living-thing")
    valid, state = _first_state(sw_env, info)
    enc = shipped._encode(swift_input(state))
    ranked = shipped.rank_valid("", valid, 5, enc=enc)
    full = shipped.score_actions([a for a, _ in ranked], enc)
    lens = [len(t) for t in target_ids(shipped.tokenizer, [a for a, _ in ranked])]
    for (a, beam), total, n in zip(ranked, full, lens):  # the beam's score is the mean log-prob per token
        assert abs(total / n - beam) < 1e-3, (a, total / n, beam)
    focus = shipped.focus_scores(valid, enc)
    targets = [a for a, _ in focus]
    assert targets and set(targets) <= set(valid) and all(a.startswith("focus on") for a in targets)
    assert not any(a.removeprefix("focus on ") in ROOMS for a in targets)  # no rooms (`X in outside` is no room)
    probs = [p for _, p in focus]
    assert abs(sum(probs) - 1) < 1e-6 and probs == sorted(probs, reverse=True)


def test_a_focus_proposal_carries_its_margin_and_an_unsure_one_is_set_aside_when_swift_is_alone():
    from agent_core.controller import ModelSwift
    from agent_core.swift.model import SwiftProposal

    class Fake:
        name = "fake"

        def __init__(self, margin):
            self.margin = margin

        def propose(self, text, valid, n):
            return SwiftProposal(top1="focus on cup", candidates=[("focus on cup", -0.1)],
                                 valid_ranked=[("focus on cup", -0.1), ("focus on bowl", -0.9), ("pick up cup", -1.2)],
                                 action="focus on cup", focus=[("focus on cup", 0.5 + self.margin / 2),
                                                               ("focus on bowl", 0.5 - self.margin / 2)],
                                 focus_margin=self.margin)

        def rank_valid(self, text, valid, n):
            return [(v, -1.0) for v in valid][:n]

    state = SwiftState(task_description="Your task is to find a cup.", score=0, look="a kitchen", inventory="")
    valid = ["focus on cup", "focus on bowl", "pick up cup", "look around"]
    sure = ModelSwift(Fake(0.8), focus_margin=0.5, defer_unsure_focus=True).propose(state, valid)
    assert sure.action == "focus on cup" and not sure.deferred
    unsure = ModelSwift(Fake(0.2), focus_margin=0.5, defer_unsure_focus=True).propose(state, valid)
    assert unsure.action == "pick up cup" and "focus margin 0.20 < 0.50" in unsure.deferred
    in_agent = ModelSwift(Fake(0.2), focus_margin=0.5, defer_unsure_focus=False).propose(state, valid)
    assert in_agent.action == "focus on cup"  # with Sage on, the critical trigger reviews it instead


@pytest.mark.jvm
@pytest.mark.model
def test_int8_quantized_swift_decodes_valid_actions(sw_env):
    import torch

    q = SwiftModel(DEFAULT_DIR, threads=1, quantize="int8")
    assert "int8" in q.name and "18.1M" in q.name
    assert any(type(m).__module__.startswith("torch.ao.nn.quantized") for m in q.model.encoder.modules())
    out = q.model.decoder.cls.predictions.decoder
    assert isinstance(out, RowMajorLinear) and out.weight_t.dtype == torch.float32  # the output layer stays float
    info = catalog().get("boil")
    valid, state = _first_state(sw_env, info)
    prop = q.propose(swift_input(state), valid, n=5)
    assert prop.valid_ranked and all(a in valid for a, _ in prop.valid_ranked)
    with pytest.raises(ValueError, match="unknown quantize"):
        SwiftModel(DEFAULT_DIR, threads=1, quantize="int4")


@pytest.mark.jvm
@pytest.mark.model
def test_the_fast_decoding_paths_choose_what_the_plain_ones_do(shipped, sw_env):
    """Two speed-ups of a Swift step (docs/BENCHMARKS.md): the cross-attention cache shared by every beam, and
    the unconstrained search batched with the valid ranking. Neither may change what Swift chooses."""
    q = SwiftModel(DEFAULT_DIR, threads=1, quantize="int8", unconstrained_beams=3)
    for task in ("find-living-thing", "boil", "chemistry-mix-paint-secondary-color"):
        valid, state = _first_state(sw_env, catalog().get(task))
        text = swift_input(state)
        enc = shipped._encode(text)
        shared = shipped._beam(enc, 5)
        shipped.fast_decoding = False  # HF's own cache: keys/values per beam, reordered every step
        try:
            plain = shipped._beam(enc, 5)
        finally:
            shipped.fast_decoding = True
        assert [a for a, _ in shared] == [a for a, _ in plain]
        assert all(abs(x - y) < 1e-4 for (_, x), (_, y) in zip(shared, plain))
        # one batched search = a 3-beam free search + the 5-beam valid ranking, done separately
        prop = q.propose(text, valid, n=5)
        q.fast_decoding = False
        slow = q.propose(text, valid, n=5)
        q.fast_decoding = True
        qenc = q._encode(text)
        free, ranked = q._beam(qenc, 3), q.rank_valid(text, valid, 5, enc=qenc)
        assert slow.action == prop.action and slow.top1 == prop.top1
        assert prop.top1 == free[0][0] and 1 <= len(prop.candidates) <= 3
        assert prop.valid_ranked[0][0] == ranked[0][0] and len(prop.valid_ranked) == len(ranked)
        assert prop.action in valid


@pytest.mark.jvm
@pytest.mark.model
def test_lean_beam_search_matches_generate(sw_env):
    """beam.py's loop replaces generate() on the fast path: on recorded states it must return the same hypotheses
    with the same scores (the same modules on the same tensors), for the batched free + valid search and for the
    prefix-constrained valid ranking alike."""
    q = SwiftModel(DEFAULT_DIR, threads=1, quantize="int8")
    for task in ("find-living-thing", "boil", "inclined-plane-friction-named-surfaces"):
        valid, state = _first_state(sw_env, catalog().get(task))
        for _ in range(3):
            text = swift_input(state)
            enc = q._encode(text)
            lean = (q._free_and_valid(enc, valid, 5), q.rank_valid(text, valid, 5, enc=enc), q._beam(enc, 3))
            q.lean_search = False
            try:
                gen = (q._free_and_valid(enc, valid, 5), q.rank_valid(text, valid, 5, enc=enc), q._beam(enc, 3))
            finally:
                q.lean_search = True
            assert lean == gen
            assert lean[0][1] and lean[1]
            action = lean[0][1][0][0]  # Swift's best valid action: the next state is one Swift would reach
            obs = sw_env.step(action)
            state.observe(action, obs.text, obs.reward, obs.room, obs.score, obs.look, obs.inventory)
            valid = sw_env.valid_actions()


@pytest.mark.jvm
@pytest.mark.model
def test_swift_gives_the_same_numbers_on_one_or_two_threads(sw_env, monkeypatch):
    """Swift takes the cores that are free at each call, so its numbers must not depend on how many it got: every
    score of a proposal (both searches and the focus scores) the same, bit for bit, on one thread and on two. Fails
    with torch's own layout of the float output layer, whose product MKL splits differently on two threads."""
    import agent_core.swift.model as swift_model

    if swift_model.usable_cores() < 2:
        pytest.skip("needs two cores")
    monkeypatch.setattr(swift_model, "runnable_elsewhere", lambda: 0)  # an idle machine, whatever runs beside
    q = SwiftModel(DEFAULT_DIR, threads=2, quantize="int8")
    valid, state = _first_state(sw_env, catalog().get("find-living-thing"))
    text = swift_input(state)
    focus = [v for v in valid if v.startswith("focus on")]
    assert len(focus) > 3

    def numbers(threads: int):
        q.threads = threads
        prop = q.propose(text, valid, n=5)
        assert q.last_threads == threads
        scores = q.score_actions(focus, q._encode(text))
        return {**prop.to_dict(), "latency_s": 0.0}, scores

    assert numbers(2) == numbers(1)
    # a call that starts with one core free (the JVM's compiler still busy after a step) takes the second for its
    # search once that core is free, with the same numbers, and gives torch its setting back
    import torch

    q.threads, before, seen = 2, torch.get_num_threads(), iter([1])
    monkeypatch.setattr(swift_model, "usable_cores", lambda: 2)
    monkeypatch.setattr(swift_model, "runnable_elsewhere", lambda: next(seen, 0))
    prop = q.propose(text, valid, n=5)
    assert (q.first_threads, q.last_threads) == (1, 2) and torch.get_num_threads() == before
    assert {**prop.to_dict(), "latency_s": 0.0} == numbers(2)[0]


@pytest.mark.parametrize("onednn", [True, False])
def test_the_operations_a_thread_count_would_change_run_on_one_thread(onednn, monkeypatch):
    """The float products of `row_major_float_linears` computed by MKL's addmm (no oneDNN) run inside `one_thread`,
    whatever torch's setting, which is given back afterwards; oneDNN's packed product (the same bits on any count)
    takes the call's threads."""
    import torch

    import agent_core.swift.architectures as arch

    if onednn and not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    if not onednn:
        monkeypatch.setattr(arch, "_onednn_pack", lambda _w: None)
    seen = []
    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    expected = model(torch.ones(2, 4))
    arch.row_major_float_linears(model)
    assert (model[0].packed is not None) == onednn
    real = arch._float_product
    monkeypatch.setattr(arch, "_float_product", lambda *a: (seen.append(torch.get_num_threads()), real(*a))[1])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        y = model(torch.ones(2, 4))
    finally:
        after = torch.get_num_threads()
        torch.set_num_threads(before)
    assert y.shape == (2, 3) and seen == [2 if onednn else 1] and after == 2
    assert torch.allclose(y, expected, atol=1e-6)  # the packed product (or the addmm) is the layer's product


def test_one_thread_holds_while_another_session_sets_the_thread_count():
    """The app serves every browser session from one Swift model, each session in its own OS thread: a call inside
    `one_thread` must stay on one thread while another session's call sets torch's count. torch keeps the count
    per OS thread (OpenMP's own, MKL's local one), which this checks, in both directions."""
    import threading

    import torch

    from agent_core.swift.architectures import one_thread

    inside, changed, left, seen = threading.Event(), threading.Event(), threading.Event(), {}

    def session_a() -> None:
        torch.set_num_threads(2)
        with one_thread():
            inside.set()
            changed.wait(10)
            seen["a_inside"] = torch.get_num_threads()
        seen["a_after"] = torch.get_num_threads()
        left.set()

    def session_b() -> None:
        torch.set_num_threads(3)
        inside.wait(10)
        seen["b_while_a_inside"] = torch.get_num_threads()
        torch.set_num_threads(3)
        changed.set()
        left.wait(10)
        seen["b_after_a_left"] = torch.get_num_threads()

    before = torch.get_num_threads()
    threads = [threading.Thread(target=f) for f in (session_a, session_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert torch.get_num_threads() == before
    assert seen == {"a_inside": 1, "a_after": 2, "b_while_a_inside": 3, "b_after_a_left": 3}


def test_a_swift_call_takes_the_free_cores(monkeypatch):
    import agent_core.swift.model as swift_model

    monkeypatch.setattr(swift_model, "usable_cores", lambda: 4)
    for others, limit, spinning, want in ((0, 8, 0, 4), (0, 2, 0, 2), (1, 8, 0, 3), (3, 8, 0, 1), (9, 8, 0, 1),
                                          (2, 8, 1, 3), (1, 8, 3, 4)):
        monkeypatch.setattr(swift_model, "runnable_elsewhere", lambda n=others: n)
        assert swift_model.free_cores(limit, spinning) == want, (others, limit, spinning)
    monkeypatch.setattr(swift_model, "runnable_elsewhere", lambda: None)  # no /proc: one thread, the safe choice
    assert swift_model.free_cores(8) == 1
    monkeypatch.undo()
    if Path("/proc/loadavg").exists():
        assert isinstance(swift_model.runnable_elsewhere(), int)


def test_pairs_have_the_spec_format():
    pairs = build_pairs("dev")
    assert pairs and all(p["input"].startswith("Task: ") and "; Visited rooms: {" in p["input"] for p in pairs[:100])
    assert not any(p["target"].startswith(("look around", "close door")) for p in pairs)


@pytest.mark.model
def test_training_script_exports_resumes_and_inits_from_an_export(tmp_path):
    """The one-command trainer end to end on a tiny model: export + card, resume, and --init-from."""
    import json

    from agent_core.swift import train

    tiny = ["--limit-train", "48", "--dev-pairs", "16", "--exact-pairs", "4", "--vocab", "400", "--d-model", "32",
            "--layers", "1", "--dec-layers", "1", "--heads", "2", "--d-ff", "64", "--epochs", "1",
            "--batch-tokens", "6000", "--max-batch", "16", "--eval-every", "2", "--warmup", "1"]
    out, work = tmp_path / "model", tmp_path / "work"
    first = train.main(tiny + ["--out", str(out), "--work", str(work)])
    assert first["steps"] >= 2 and (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()
    assert (tmp_path / "MODEL_CARD.md").read_text().count("python -m agent_core.swift.train") == 1
    assert (tmp_path / "loss_curve.png").stat().st_size > 1000
    # resume continues the step count from the checkpoint and records both commands
    again = train.main(tiny + ["--out", str(out), "--work", str(work), "--resume", "--epochs", "2"])
    assert again["steps"] > first["steps"] and len(again["commands"]) == 2
    # a fresh machine: start from the export, the card lists all three commands in order
    third = train.main(tiny + ["--out", str(tmp_path / "m3"), "--work", str(tmp_path / "w3"), "--init-from", str(out)])
    assert len(third["commands"]) == 3 and "--init-from" in third["commands"][-1]
    assert json.loads((tmp_path / "m3" / "training_summary.json").read_text())["commands"] == third["commands"]
    # the card tells the runs apart: the resumed run's record, then this one's (steps counted per run)
    assert [r["steps"] for r in third["runs"]] == [again["runs"][0]["steps"], again["runs"][1]["steps"], third["steps"]]
    assert again["runs"][0]["steps"] == first["steps"] and sum(r["steps"] for r in again["runs"]) == again["steps"]
    card = (tmp_path / "MODEL_CARD.md").read_text()
    assert f"{first['steps']} steps in" in card and ", then " in card and "are the last run's" in card


def test_reduced_minilm_vocabulary_tokenizes_the_corpus_like_the_full_one(tmp_path):
    """Cutting MiniLM's WordPiece vocabulary to the corpus must not change how the corpus tokenizes."""
    from transformers import BertTokenizerFast

    from agent_core.swift.model import minilm_path, reduced_minilm_tokenizer

    texts = [p["input"] for p in build_pairs("dev")[:200]] + ["focus on the unseen Xylophone-9"]
    tok, old_ids = reduced_minilm_tokenizer(texts[:-1], tmp_path / "tok")
    full = BertTokenizerFast.from_pretrained(minilm_path())
    assert 1000 < len(tok) < 6000 and len(old_ids) == len(tok)
    for t in texts[:-1]:
        assert tok.convert_ids_to_tokens(tok(t)["input_ids"]) == full.convert_ids_to_tokens(full(t)["input_ids"])
    # the old ids point at the same pieces, so copied embedding rows mean the same thing
    assert full.convert_ids_to_tokens(old_ids[:50]) == tok.convert_ids_to_tokens(list(range(50)))
    # an unseen word still splits into known pieces (single characters are always kept), never [UNK]
    assert "[UNK]" not in tok.tokenize(texts[-1])


@pytest.mark.model
def test_minilm_variant_trains_exports_and_decodes(tmp_path):
    """--arch minilm: pretrained encoder + small decoder; export in float16, load, rank valid actions."""
    import json

    from agent_core.swift import train
    from agent_core.swift.model import encode_inputs

    out = tmp_path / "model"
    summary = train.main(["--arch", "minilm", "--dec-layers", "1", "--limit-train", "48", "--dev-pairs", "8",
                          "--exact-pairs", "4", "--epochs", "1", "--batch-tokens", "6000", "--max-batch", "16",
                          "--eval-every", "2", "--warmup", "1", "--lr", "1e-3", "--max-input", "512",
                          "--out", str(out), "--work", str(tmp_path / "work")])
    assert summary["architecture"]["arch"] == "minilm" and summary["architecture"]["d_model"] == 384
    assert json.loads((out / "config.json").read_text())["model_type"] == "encoder-decoder"
    size_mb = (out / "model.safetensors").stat().st_size / 1e6
    assert size_mb < 2.2 * summary["parameters"] / 1e6  # float16 on disk
    assert "all-MiniLM-L6-v2" in (tmp_path / "MODEL_CARD.md").read_text()
    m = SwiftModel(out, threads=1)
    assert m.name.startswith("swift-minilm") and m.max_input_tokens == 512
    pair = build_pairs("dev")[0]
    valid = ["go to kitchen", "Open Door To Hallway", pair["target"]]
    prop = m.propose(pair["input"], valid, n=3)
    assert prop.candidates and prop.top1 == prop.candidates[0][0]
    # every valid-ranked action is returned as the game spelled it, even where WordPiece lowercases
    assert prop.valid_ranked and all(a in valid for a, _ in prop.valid_ranked) and prop.action in valid
    # an over-long input keeps its start (the task) and its end (room, inventory, visited rooms)
    long_text = pair["input"].replace("Action history: [", "Action history: [" + "wait1 (+0) --> nothing. | " * 200)
    ids = encode_inputs(m.tokenizer, [long_text], 512)["input_ids"][0].tolist()
    full = m.tokenizer(long_text)["input_ids"]
    assert len(ids) == 512 and ids[:100] == full[:100] and ids[-300:] == full[-300:]


def test_the_lazy_prefix_tree_allows_what_the_valid_actions_continue_with():
    """The constrained search asks the tree which tokens may follow a prefix: every next token of a valid action
    with that prefix, EOS once an action is complete or the prefix leads nowhere (the tree is built as a search
    reaches its nodes)."""
    import random

    from agent_core.swift.model import _Trie

    rng, eos = random.Random(0), 2
    seqs = [[rng.randrange(3, 9) for _ in range(rng.randrange(1, 6))] + [eos] for _ in range(60)]
    trie = _Trie(seqs)
    prefixes = {tuple(s[:i]) for s in seqs for i in range(len(s) + 1)} | {(8, 8, 8, 8, 8, 8), (1,)}
    for p in sorted(prefixes):
        want = sorted({s[len(p)] for s in seqs if len(s) > len(p) and tuple(s[:len(p)]) == p})
        assert sorted(trie.next_tokens(list(p))) == want
        assert sorted(trie.next_ids(list(p), eos).tolist()) == (want or [eos])
    assert trie.next_ids([3], eos) is trie.next_ids([3], eos)  # held by the node


def test_thread_free_kernels_give_the_same_bits():
    """What Swift runs on the call's cores instead of one thread must give the same bits on 1 and 2 threads: oneDNN's
    packed float products (Swift's output layer, 10 and 400 rows; the shapes of a float model's layers) and flash
    attention over a query block of at least SAME_BITS_QUERY_ROWS rows (the decoder's cross-attention), while the
    few-row attention that is not run that way stays on one thread whatever torch's setting."""
    import torch
    import torch.nn.functional as F

    import agent_core.swift.architectures as arch

    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    before = torch.get_num_threads()
    gen = torch.Generator().manual_seed(0)

    def on(threads: int, fn):
        torch.set_num_threads(threads)
        try:
            return fn()
        finally:
            torch.set_num_threads(before)

    for k, n in ((384, 2915), (384, 384), (384, 1536), (1536, 384)):
        layer = torch.nn.Sequential(torch.nn.Linear(k, n))
        arch.row_major_float_linears(layer)
        for rows in (1, 3, 10, 64, 400):
            x = torch.randn(rows, k, generator=gen)
            with torch.inference_mode():
                assert torch.equal(on(1, lambda: layer(x)), on(2, lambda: layer(x))), (k, n, rows)
    for rows in (arch.SAME_BITS_QUERY_ROWS, 10, 24, 320):
        q = torch.randn(1, 12, rows, 32, generator=gen)
        kv = torch.randn(2, 1, 12, 300, 32, generator=gen)
        attend = lambda: F.scaled_dot_product_attention(q, kv[0], kv[1], scale=0.17)  # noqa: E731
        assert torch.equal(on(1, attend), on(2, attend)), rows
    seen = []
    torch.set_num_threads(2)
    try:
        with arch.attention_threads(arch.SAME_BITS_QUERY_ROWS - 1):
            seen.append(torch.get_num_threads())
        with arch.attention_threads(arch.SAME_BITS_QUERY_ROWS):
            seen.append(torch.get_num_threads())
        torch.set_num_threads(arch.CHECKED_THREADS + 1)  # more than was ever checked: one thread
        with arch.attention_threads(100):
            seen.append(torch.get_num_threads())
    finally:
        torch.set_num_threads(before)
    assert seen == [1, 2, 1]
