"""Swift's beam search without `generate()`'s per-step machinery.

Swift's decoder is two small BERT layers: one step of a 10-row beam is about 1 ms of arithmetic, and Hugging Face's
`generate()` spent as long again per step on its own bookkeeping (model-input preparation, cache wrappers, output
capture, stopping-criteria objects). This loop runs the same modules in the same order on the same tensors and
keeps the beams with `generate()`'s own helpers (`_get_top_k_continuations`, `_get_running_beams_for_next_iteration`,
`_update_finished_beams`, `_check_early_stop_heuristic`), so it returns what `generate(num_beams=K,
early_stopping=False, length_penalty=1.0)` returns: the same sequences and the same scores. The test
`test_lean_beam_search_matches_generate` holds it to that on recorded states.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from .architectures import attention_threads, one_thread


def _direct(linear) -> Callable[[torch.Tensor], torch.Tensor]:
    """The op behind a linear layer, called without the module machinery (a step makes ~20 of these calls on
    10 rows, where the per-call overhead is a good part of the cost): the same op on the same arguments, so the same
    numbers. An int8 dynamic layer calls its quantized kernel as the module would; anything else is the module."""
    packed = getattr(linear, "_packed_params", None)
    if packed is not None and packed.dtype == torch.qint8 and getattr(linear, "version", 4) >= 4:
        # the op's one overload, called as itself: the overload packet's Python dispatch costs ~3 us a call
        params, op = packed._packed_params, torch.ops.quantized.linear_dynamic.default
        return lambda x: op(x, params, True)
    return linear


def _norm(ln) -> Callable[[torch.Tensor], torch.Tensor]:
    shape, w, b, eps = ln.normalized_shape, ln.weight, ln.bias, ln.eps
    return lambda x: F.layer_norm(x, shape, w, b, eps)


def _int8_weight(linear):
    """(int8 weight, bias) of an int8 dynamic layer quantized per tensor, else None."""
    packed = getattr(linear, "_packed_params", None)
    if packed is None or packed.dtype != torch.qint8 or getattr(linear, "version", 4) < 4:
        return None
    w, b = torch.ops.quantized.linear_unpack(packed._packed_params)
    return (w, b) if w.qscheme() == torch.per_tensor_affine and b is not None else None


def _side_by_side(linears) -> Callable[[torch.Tensor], torch.Tensor]:
    """Several layers that read the same input as one call whose output holds theirs side by side. int8 layers
    become one int8 layer quantized per output channel, each channel with its own layer's scale: the same
    integers, the same int32 sums, the same scale per output, so the same numbers as the separate calls (checked
    against the modules by `test_lean_beam_search_matches_generate`), at one call's overhead: a decoder step's
    query, key and value are three 10-row products whose cost is mostly the call. Other layers: concatenated."""
    parts = [_int8_weight(lin) for lin in linears]
    if any(p is None for p in parts):
        fns = [_direct(lin) for lin in linears]
        return lambda x: torch.cat([f(x) for f in fns], dim=-1)
    ints = torch.cat([w.int_repr() for w, _ in parts])
    scales = torch.cat([torch.full((w.shape[0],), w.q_scale(), dtype=torch.double) for w, _ in parts])
    zeros = torch.cat([torch.full((w.shape[0],), w.q_zero_point(), dtype=torch.long) for w, _ in parts])
    weight = torch._make_per_channel_quantized_tensor(ints, scales, zeros, 0)
    params = torch.ops.quantized.linear_prepack(weight, torch.cat([b for _, b in parts]))
    op = torch.ops.quantized.linear_dynamic.default
    return lambda x: op(x, params, True)


def _layer_ops(layer) -> tuple:
    sa, so, ca, co = (layer.attention.self, layer.attention.output, layer.crossattention.self,
                      layer.crossattention.output)
    act = layer.intermediate.intermediate_act_fn
    return (_side_by_side([sa.query, sa.key, sa.value]), sa.num_attention_heads, sa.attention_head_size,
            sa.scaling, _direct(so.dense), _norm(so.LayerNorm), _direct(ca.query), ca.num_attention_heads,
            ca.attention_head_size, ca.scaling, _direct(co.dense), _norm(co.LayerNorm),
            _direct(layer.intermediate.dense), getattr(act, "act", act), _direct(layer.output.dense),
            _norm(layer.output.LayerNorm))


class LeanDecoder:
    """One decoding step of a BertLMHeadModel decoder for `rows` rows that all read one encoding: self-attention
    with its own key/value cache, cross-attention against the single projected copy of the encoder's keys and values
    (every row's query in one block), the feed-forward, and the LM head. It runs the layers' own weights through
    the ops their modules would call, in the modules' order (BertEmbeddings, BertSelfOutput, BertIntermediate,
    BertOutput, BertPredictionHeadTransform; dropout is off in eval), the query, key and value side by side in one
    product (`_side_by_side`), so the logits are the modules' logits bit for bit
    (`test_lean_beam_search_matches_generate`). The ops are built once per decoder (held on it: build the model,
    quantize it, then search)."""

    def __init__(self, decoder, h: torch.Tensor, rows: int):
        self.rows = rows
        static = getattr(decoder, "_lean_static", None)
        if static is None:
            layers = decoder.bert.encoder.layer
            emb, head = decoder.bert.embeddings, decoder.cls.predictions
            act = head.transform.transform_act_fn
            static = decoder._lean_static = (
                [_layer_ops(layer) for layer in layers],
                [(_side_by_side([layer.crossattention.self.key, layer.crossattention.self.value]),
                  layer.crossattention.self.attention_head_size) for layer in layers],
                emb.word_embeddings.weight, emb.position_embeddings.weight,
                emb.token_type_embeddings.weight[0],  # BertEmbeddings' default token type, 0
                _norm(emb.LayerNorm), head.transform.dense, getattr(act, "act", act), _norm(head.transform.LayerNorm),
                head.decoder)
        (self.ops, cross_kv, self.words, self.positions, self.token_type, self.emb_norm, self.head_dense,
         self.head_act, self.head_norm, self.head_out) = static
        self.cross = []
        for kv, d in cross_kv:  # the encoder's keys and values, projected once for every row and step
            both = kv(h).view(*h.shape[:-1], 2, -1, d)
            self.cross.append((both[..., 0, :, :].transpose(1, 2), both[..., 1, :, :].transpose(1, 2)))
        self.keys: list[torch.Tensor | None] = [None] * len(self.ops)
        self.values: list[torch.Tensor | None] = [None] * len(self.ops)
        self.pos = 0

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (rows x vocab) after feeding one token per row."""
        e = self.words[tokens.view(-1)] + self.token_type
        x = self.emb_norm(e + self.positions[self.pos]).unsqueeze(1)
        b = x.shape[0]
        for li, (qkv_, heads, d, scale, o_, o_norm, cq_, cheads, cd, cscale, co_, co_norm, inter_, act, out_,
                 out_norm) in enumerate(self.ops):
            qkv = qkv_(x).view(b, 1, 3, heads, d)
            q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
            if self.keys[li] is not None:
                k, v = torch.cat([self.keys[li], k], dim=-2), torch.cat([self.values[li], v], dim=-2)
            self.keys[li], self.values[li] = k, v
            with one_thread():
                ctx = F.scaled_dot_product_attention(q, k, v, scale=scale).transpose(1, 2).reshape(b, 1, -1)
            att = o_norm(o_(ctx) + x)
            cq = cq_(att).view(b, 1, cheads, cd).transpose(1, 2).transpose(0, 1).reshape(1, cheads, b, cd)
            ck, cv = self.cross[li]
            with attention_threads(b):  # every row's query in one block: on the call's cores where that is exact
                cctx = F.scaled_dot_product_attention(cq, ck, cv, scale=cscale)
            cctx = cctx.reshape(cheads, b, 1, cd).permute(1, 2, 0, 3).reshape(b, 1, -1)
            catt = co_norm(co_(cctx) + att)
            x = out_norm(out_(act(inter_(catt))) + catt)
        self.pos += 1
        return self.head_out(self.head_norm(self.head_act(self.head_dense(x[:, -1, :]))))

    def reorder(self, beam_idx: torch.Tensor) -> None:
        for li in range(len(self.ops)):
            self.keys[li] = self.keys[li].index_select(0, beam_idx)
            self.values[li] = self.values[li].index_select(0, beam_idx)


def beam_search(model, h: torch.Tensor, num_beams: int, copies: int, max_new_tokens: int, start: int, eos: int,
                pad: int, processor: Callable | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`copies` independent beam searches of `num_beams` beams over one encoding `h` (1 x L x d), in one batch.
    Returns (sequences, scores) for every beam of every copy, best first within a copy, as `generate()` returns
    them with num_return_sequences=num_beams (sequences start with the decoder start token)."""
    gm = model  # GenerationMixin: its beam helpers are plain tensor code
    batch, k = copies, num_beams
    max_length = 1 + max_new_tokens
    keep = 2 * k  # one EOS token: generate() keeps (1 + n_eos) * num_beams candidates
    top_mask = torch.cat((torch.ones(k, dtype=torch.bool), torch.zeros(keep - k, dtype=torch.bool)))
    fill = pad if pad is not None else eos
    running = torch.full((batch, k, max_length), fill, dtype=torch.int64)
    running[:, :, 0] = start
    sequences = running.clone()
    running_scores = torch.zeros((batch, k))
    running_scores[:, 1:] = -1e9
    scores = torch.full((batch, k), -1e9)
    finished = torch.zeros((batch, k), dtype=torch.bool)
    improvable = torch.ones((batch, 1), dtype=torch.bool)
    running_idx = torch.full((batch, k, max_length - 1), -1, dtype=torch.int32)
    beam_idx_all = running_idx.clone()
    dec = LeanDecoder(model.decoder, h, batch * k)
    cur = 1
    tokens = running[:, :, 0].reshape(-1)
    while True:
        logits = dec.step(tokens).float()
        log_probs = F.log_softmax(logits, dim=-1)
        if processor is not None:
            log_probs = processor(running[:, :, :cur].reshape(batch * k, cur), log_probs)
        log_probs = (log_probs.view(batch, k, -1) + running_scores[:, :, None]).reshape(batch, -1)
        top_lp, top_seq, top_idx = gm._get_top_k_continuations(
            accumulated_log_probs=log_probs, running_sequences=running, running_beam_indices=running_idx,
            cur_len=cur, decoder_prompt_len=1, do_sample=False, beams_to_keep=keep, num_beams=k, batch_size=batch)
        last = top_seq[:, :, cur]
        hits = (last == eos) | (cur + 1 >= max_length)
        running, running_scores, running_idx = gm._get_running_beams_for_next_iteration(
            topk_log_probs=top_lp, topk_running_sequences=top_seq, topk_running_beam_indices=top_idx,
            next_token_hits_stopping_criteria=hits, num_beams=k)
        sequences, scores, beam_idx_all, finished = gm._update_finished_beams(
            sequences=sequences, topk_running_sequences=top_seq, beam_scores=scores, topk_log_probs=top_lp,
            beam_indices=beam_idx_all, topk_running_beam_indices=top_idx, is_early_stop_heuristic_unsatisfied=improvable,
            is_sent_finished=finished, next_token_hits_stopping_criteria=hits, top_num_beam_mask=top_mask, num_beams=k,
            cur_len=cur, decoder_prompt_len=1, length_penalty=1.0, early_stopping=False)
        dec.reorder(running_idx[..., cur - 1].reshape(-1).long())
        cur += 1
        improvable = gm._check_early_stop_heuristic(
            is_early_stop_heuristic_unsatisfied=improvable, running_beam_scores=running_scores, beam_scores=scores,
            is_sent_finished=finished, cur_len=cur, max_length=max_length, decoder_prompt_len=1, early_stopping=False,
            length_penalty=1.0)
        if not (bool(improvable.any()) and not bool(hits.all())):
            break
        tokens = running[:, :, cur - 1].reshape(-1)
    generated = ((beam_idx_all + 1).bool()).sum(dim=-1).max()
    return sequences.reshape(batch * k, -1)[:, :1 + int(generated)], scores.reshape(-1)
