"""Swift's tokenizers and token ids: the BPE trained on the corpus (`t5`), MiniLM's WordPiece cut to the corpus
(`minilm`), and the input / target id rows both architectures train and decode with.
`agent_core.swift.model` re-exports every name.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

SPECIAL = {"pad": "<pad>", "eos": "</s>", "unk": "<unk>"}


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


MINILM_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def minilm_path() -> str:
    """The packaged all-MiniLM-L6-v2, the same weights the memory stream embeds with."""
    from memory_store.embeddings import model_path

    return model_path()


def reduced_minilm_tokenizer(texts: Sequence[str], out_dir: Path):
    """MiniLM's uncased WordPiece restricted to the pieces `texts` use, plus every single character
    (so unseen words still split into known pieces). Greedy longest-match over a vocabulary that holds
    every piece the full vocabulary produced on these texts tokenizes them exactly as before.
    Returns (tokenizer, old ids of the new vocabulary in order)."""
    from transformers import BertTokenizerFast

    full = BertTokenizerFast.from_pretrained(minilm_path())
    vocab = full.get_vocab()
    used: set[int] = set()
    for i in range(0, len(texts), 2000):
        for ids in full(list(texts[i:i + 2000]), add_special_tokens=False)["input_ids"]:
            used.update(ids)
    chars = [t for t in vocab if len(t) == 1 or (t.startswith("##") and len(t) == 3)]
    keep = MINILM_SPECIALS + sorted({full.convert_ids_to_tokens(i) for i in used} | set(chars) - set(MINILM_SPECIALS))
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(keep)}, do_lower_case=True)
    tok.save_pretrained(out_dir)
    return tok, [vocab[t] for t in keep]


def eos_id(tok) -> int:
    return tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id


def input_rows(tok, texts: Sequence[str], max_len: int) -> list[list[int]]:
    """Token ids of inputs; an over-long input loses the middle of its action history (the task at the
    start, and the room, inventory and visited rooms at the end, are what the next action needs)."""
    rows = tok(list(texts), add_special_tokens=True, verbose=False)["input_ids"]
    head = max_len // 4
    return [r if len(r) <= max_len else r[:head] + r[len(r) - (max_len - head):] for r in rows]


def encode_inputs(tok, texts: Sequence[str], max_len: int) -> dict:
    """Tokenized, cut (see input_rows) and padded to the batch's longest input."""
    return pad_rows(input_rows(tok, texts, max_len), tok.pad_token_id)


def pad_rows(rows: Sequence[Sequence[int]], pad_id: int) -> dict:
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        mask[i, :len(r)] = 1
    return {"input_ids": ids, "attention_mask": mask}


def target_ids(tok, texts: Sequence[str], max_len: int | None = None) -> list[list[int]]:
    """Decoder targets: the action's tokens then EOS (no [CLS] for the BERT tokenizer: the decoder
    start token plays that part); cut to `max_len` tokens when given."""
    rows = tok(list(texts), add_special_tokens=False)["input_ids"]
    if max_len is not None:
        rows = [r[: max_len - 1] for r in rows]
    return [r + [eos_id(tok)] for r in rows]
