"""Swift's model: a T5 trained from scratch by this project, its tokenizer, and decoding.

Decoding gives three things per step (SPEC.md section 2 and the controller's needs):
- `candidates`: unconstrained beam search, ranked with log-probabilities; its top-1 is what the
  model "wants" (the controller's invalid trigger and Gate-1 look at it);
- `rank_valid`: beam search constrained to a prefix tree of the current valid actions, so the
  proposal is valid whenever the model has any preference among valid actions;
- `propose`: both, plus timings, as one `SwiftProposal` record.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = ROOT / "assets" / "swift" / "model"
SPECIAL = {"pad": "<pad>", "eos": "</s>", "unk": "<unk>"}


@dataclass
class SwiftProposal:
    top1: str  # unconstrained top-1 (may be invalid)
    candidates: list[tuple[str, float]]  # unconstrained beam, best first (action, log-prob)
    valid_ranked: list[tuple[str, float]] = field(default_factory=list)  # constrained to valid actions
    action: str = ""  # what Swift proposes: best valid action, else the unconstrained top-1
    latency_s: float = 0.0
    guard: str = ""  # the loop guard's reason when it replaced `action` (loop_guard.py)

    def to_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------ tokenizer

def train_tokenizer(texts: Sequence[str], vocab_size: int, out_dir: Path):
    """A SentencePiece-style BPE (spaces kept as '▁') trained on this corpus, wrapped for transformers."""
    from tokenizers import SentencePieceBPETokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    tok = SentencePieceBPETokenizer()
    tok.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2,
                            special_tokens=[SPECIAL["pad"], SPECIAL["eos"], SPECIAL["unk"]])
    raw = tok._tokenizer  # the plain `tokenizers.Tokenizer` inside the convenience wrapper
    eos_id = raw.token_to_id(SPECIAL["eos"])
    raw.post_processor = TemplateProcessing(single=f"$A {SPECIAL['eos']}", special_tokens=[(SPECIAL["eos"], eos_id)])
    fast = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token=SPECIAL["pad"], eos_token=SPECIAL["eos"],
                                   unk_token=SPECIAL["unk"])
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out_dir)
    return fast


# ------------------------------------------------------------------ model

def build_t5(vocab_size: int, pad_id: int, eos_id: int, d_model: int = 256, layers: int = 4, heads: int = 4,
             d_ff: int = 1024, dropout: float = 0.1, dec_layers: int | None = None):
    """A T5 sized for a CPU. The decoder may be shallower: targets are a few tokens, inputs hundreds."""
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(vocab_size=vocab_size, d_model=d_model, d_kv=d_model // heads, d_ff=d_ff, num_layers=layers,
                   num_decoder_layers=dec_layers or layers, num_heads=heads, dropout_rate=dropout, feed_forward_proj="gated-gelu",
                   pad_token_id=pad_id, eos_token_id=eos_id, decoder_start_token_id=pad_id,
                   # tied embeddings rescale the output by d_model**-0.5: a sane initial loss (~ln V) instead of ~60
                   tie_word_embeddings=True, relative_attention_num_buckets=32, relative_attention_max_distance=128)
    return T5ForConditionalGeneration(cfg)


class _Trie:
    """Prefix tree over token-id sequences of the valid actions (each ending in EOS)."""

    def __init__(self, seqs: list[list[int]]):
        self.root: dict = {}
        for s in seqs:
            node = self.root
            for t in s:
                node = node.setdefault(t, {})

    def next_tokens(self, prefix: list[int]) -> list[int]:
        node = self.root
        for t in prefix:
            node = node.get(t)
            if node is None:
                return []
        return list(node.keys())


class SwiftModel:
    """Loads a trained checkpoint (model + tokenizer) and decodes ranked actions on the CPU."""

    def __init__(self, path: str | Path = DEFAULT_DIR, device: str | None = None, threads: int | None = None,
                 max_input_tokens: int = 1024, max_output_tokens: int = 32):
        import torch
        from transformers import AutoTokenizer, T5ForConditionalGeneration

        path = Path(path)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no Swift checkpoint at {path}; train one with "
                                    f"`python -m agent_core.swift.train` (see assets/swift/MODEL_CARD.md)")
        if threads:
            torch.set_num_threads(threads)
        torch.set_flush_denormal(True)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = T5ForConditionalGeneration.from_pretrained(path).to(self.device).eval()
        self.path = path
        self.name = f"swift-t5 ({path.name}, {sum(p.numel() for p in self.model.parameters()) / 1e6:.1f}M)"
        self.max_output_tokens = max_output_tokens
        card = path / "training_summary.json"
        self.summary = json.loads(card.read_text()) if card.exists() else {}
        # Inputs longer than the training truncation put tokens at positions the model never saw.
        trained = self.summary.get("args", {}).get("max_input")
        self.max_input_tokens = min(max_input_tokens, trained) if trained else max_input_tokens

    def _encode(self, text: str):
        enc = self.tokenizer([text], return_tensors="pt", truncation=True, max_length=self.max_input_tokens)
        return {k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}

    def _beam(self, enc, n: int, prefix_fn=None) -> list[tuple[str, float]]:
        import torch

        with torch.inference_mode():
            # at least 2 beams: beam search is what returns sequence scores (greedy returns none)
            out = self.model.generate(**enc, num_beams=max(n, 2), num_return_sequences=max(n, 1),
                                      max_new_tokens=self.max_output_tokens, output_scores=True,
                                      return_dict_in_generate=True, early_stopping=True,
                                      prefix_allowed_tokens_fn=prefix_fn, length_penalty=1.0)
        texts = self.tokenizer.batch_decode(out.sequences, skip_special_tokens=True)
        seq_scores = getattr(out, "sequences_scores", None)
        scores = seq_scores.tolist() if seq_scores is not None else [0.0] * len(texts)
        seen: dict[str, float] = {}
        for t, s in zip(texts, scores):
            t = " ".join(t.split())
            if t and t not in seen and not math.isinf(s):
                seen[t] = float(s)
        return sorted(seen.items(), key=lambda kv: -kv[1])

    def candidates(self, text: str, n: int = 5) -> list[tuple[str, float]]:
        return self._beam(self._encode(text), n)

    def rank_valid(self, text: str, valid_actions: Sequence[str], n: int = 5, enc=None) -> list[tuple[str, float]]:
        """Beam search restricted to the valid actions' prefix tree: the best valid actions under the model."""
        if not valid_actions:
            return []
        enc = enc or self._encode(text)
        ids = self.tokenizer(list(valid_actions), add_special_tokens=True)["input_ids"]
        trie = _Trie(ids)
        start = self.model.config.decoder_start_token_id
        eos = self.tokenizer.eos_token_id

        def allowed(_batch_id, sent):
            toks = sent.tolist()
            prefix = toks[1:] if toks and toks[0] == start else toks
            nxt = trie.next_tokens(prefix)
            return nxt or [eos]

        ranked = self._beam(enc, min(n, len(valid_actions)), allowed)
        valid = set(" ".join(v.split()) for v in valid_actions)
        return [(a, s) for a, s in ranked if a in valid]

    def propose(self, text: str, valid_actions: Sequence[str] | None, n: int = 5) -> SwiftProposal:
        t0 = time.perf_counter()
        enc = self._encode(text)
        cands = self._beam(enc, n)
        top1 = cands[0][0] if cands else ""
        ranked = self.rank_valid(text, valid_actions, n, enc=enc) if valid_actions else []
        action = ranked[0][0] if ranked else top1
        return SwiftProposal(top1=top1, candidates=cands, valid_ranked=ranked, action=action,
                             latency_s=time.perf_counter() - t0)


def default_threads() -> int:
    # Inference of a small model is fastest on one thread here (less sync); training uses all cores.
    return int(os.environ.get("SWIFT_THREADS", "1"))
