"""Training batches for Swift (examples of similar length grouped, each batch padded to its own longest) and the dev
evaluation that runs over them. `agent_core.swift.train` re-exports every name.
"""
from __future__ import annotations

import random

from ..actions import action_key
from .tokenizer import input_rows, pad_rows, target_ids


def length_batches(lengths: list[int], max_tokens: int, max_batch: int, rng: random.Random) -> list[list[int]]:
    """Group examples of similar length so each batch is padded only to its own longest input."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i] + rng.random())
    batches, cur, cur_max = [], [], 0
    for i in order:
        new_max = max(cur_max, lengths[i])
        if cur and (new_max * (len(cur) + 1) > max_tokens or len(cur) >= max_batch):
            batches.append(cur)
            cur, new_max = [], lengths[i]
        cur.append(i)
        cur_max = new_max
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(tok, examples: list[dict], max_in: int, max_out: int, device):
    return batch_tensors(input_rows(tok, [e["input"] for e in examples], max_in),
                         target_ids(tok, [e["target"] for e in examples], max_out), tok.pad_token_id, device)


def batch_tensors(in_rows: list[list[int]], rows: list[list[int]], pad_id: int, device):
    """Inputs padded to the batch's own longest, labels padded with -100 (ignored by the loss)."""
    import torch

    enc = pad_rows(in_rows, pad_id)
    lab = torch.full((len(rows), max(len(r) for r in rows)), -100, dtype=torch.long)
    for i, r in enumerate(rows):
        lab[i, :len(r)] = torch.tensor(r)
    return enc["input_ids"].to(device), enc["attention_mask"].to(device), lab.to(device)


def evaluate(model, tok, dev: list[dict], args, device, n_exact: int) -> tuple[float, float]:
    """Dev loss over all dev pairs and greedy exact match on the first n_exact."""
    import torch

    model.eval()
    total, count = 0.0, 0
    bs = 128 if device.type == "cuda" else 32
    with torch.inference_mode():
        for i in range(0, len(dev), bs):
            ids, mask, lab = collate(tok, dev[i:i + bs], args.max_input, args.max_output, device)
            with _autocast(device):
                loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss
            n = int((lab != -100).sum())
            total += float(loss) * n
            count += n
        hits = 0
        sub = dev[:n_exact]
        for i in range(0, len(sub), bs):
            batch = sub[i:i + bs]
            ids, mask, _ = collate(tok, batch, args.max_input, args.max_output, device)
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.max_output, num_beams=1)
            for e, t in zip(batch, tok.batch_decode(out, skip_special_tokens=True)):
                hits += action_key(t) == action_key(e["target"])
    model.train()
    return total / max(count, 1), hits / max(len(sub), 1)


def _autocast(device):
    import contextlib

    import torch

    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
