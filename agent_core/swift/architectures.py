"""Swift's two seq2seq architectures: building them to train (`t5` from scratch, `minilm` from the pretrained
encoder), freezing, loading an exported checkpoint, and int8 quantization for the CPU.
`agent_core.swift.model` re-exports every name.
"""
from __future__ import annotations

import json
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Sequence

from .tokenizer import minilm_path, reduced_minilm_tokenizer


def build_minilm_seq2seq(texts: Sequence[str], out_dir: Path, dec_layers: int = 2, dropout: float = 0.1):
    """Pretrained MiniLM-L6 encoder (vocabulary cut to this corpus) + a fresh BERT decoder of `dec_layers`
    layers whose word embeddings (input and output) start as a copy of the encoder's, so it starts
    knowing words. (A copy rather than a shared tensor: transformers refuses to save cross-module ties;
    with the cut vocabulary the copy costs ~2M parameters.)"""
    import torch
    from transformers import BertConfig, BertLMHeadModel, BertModel, EncoderDecoderModel

    tok, old_ids = reduced_minilm_tokenizer(texts, out_dir)
    enc = BertModel.from_pretrained(minilm_path(), add_pooling_layer=False)
    rows = enc.embeddings.word_embeddings.weight.data[torch.tensor(old_ids)].clone()
    enc.resize_token_embeddings(len(old_ids))
    enc.embeddings.word_embeddings.weight.data.copy_(rows)
    ec = enc.config
    dcfg = BertConfig(vocab_size=len(old_ids), hidden_size=ec.hidden_size, num_hidden_layers=dec_layers,
                      num_attention_heads=ec.num_attention_heads, intermediate_size=ec.intermediate_size,
                      hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, is_decoder=True,
                      add_cross_attention=True, max_position_embeddings=64, pad_token_id=tok.pad_token_id)
    dec = BertLMHeadModel(dcfg)  # its input embeddings and output layer are tied to each other
    dec.bert.embeddings.word_embeddings.weight.data.copy_(rows)
    model = EncoderDecoderModel(encoder=enc, decoder=dec)
    for cfg in (model.config, model.generation_config):
        cfg.decoder_start_token_id = tok.cls_token_id
        cfg.pad_token_id = tok.pad_token_id
        cfg.eos_token_id = tok.sep_token_id
    return tok, model


def freeze_encoder_layers(model, n: int) -> None:
    """Keep the pretrained embeddings and the lowest `n` encoder layers fixed (cheaper, and a small
    dataset cannot wash out what they know); the decoder, whose embeddings start as a copy of the
    encoder's, then learns to read and write in the pretrained word space."""
    if not is_minilm(model) or n <= 0:
        return
    for p in model.encoder.embeddings.parameters():
        p.requires_grad = False
    for layer in model.encoder.encoder.layer[:n]:
        for p in layer.parameters():
            p.requires_grad = False


def is_minilm(model) -> bool:
    return getattr(model.config, "model_type", "") == "encoder-decoder"


def load_seq2seq(path: str | Path, device: str = "cpu"):
    """Load an exported Swift model (either architecture) and its tokenizer, in float32."""
    import torch
    from transformers import AutoTokenizer, EncoderDecoderModel, T5ForConditionalGeneration

    path = Path(path)
    tok = AutoTokenizer.from_pretrained(path)
    if json.loads((path / "config.json").read_text()).get("model_type") == "encoder-decoder":
        from transformers.utils import logging as hf_logging

        # the BERT encoder is rebuilt with an (unused, never saved) pooler: keep its load report quiet
        level = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        try:
            model = EncoderDecoderModel.from_pretrained(path, dtype=torch.float32)
        finally:
            hf_logging.set_verbosity(level)
    else:
        model = T5ForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
    return tok, model.to(device)


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


@contextmanager
def one_thread():
    """Run an operation whose result would depend on torch's thread count on one thread (its bits then never change
    with the cores a Swift call took): MKL's float products and attention over a query block of fewer than 8 rows
    (a decoder step's self-attention: one token a row; 8 keys, 1 vs 2 threads: a different last bit on an AMD EPYC).
    Setting the count costs well under a microsecond."""
    import torch

    n = torch.get_num_threads()
    if n > 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if n > 1:
            torch.set_num_threads(n)


# A query block of at least this many rows: torch's CPU flash attention gave the same bits on 1 and 2 threads;
# blocks of 1-3 rows differ in a last bit (as if the keys were split between threads). Checked on torch 2.13.0, AMD
# EPYC with AVX-512: 48 random cases for each block size from 4 to 24 rows (5 to 1,024 keys), none differed; 1, 2
# and 3 rows differed in 30, 6 and 30 of 48. A margin over 4; `test_thread_free_kernels_give_the_same_bits` and
# `test_swift_gives_the_same_numbers_on_one_or_two_threads` check the result.
SAME_BITS_QUERY_ROWS = 8


# Swift's numbers are checked to be the same, bit for bit, on 1 and 2 threads (this project's machine:
# test_swift_gives_the_same_numbers_on_one_or_two_threads, and test_thread_free_kernels_give_the_same_bits); no more
# is claimed: where a call runs on more (SWIFT_THREADS on a big machine), the kernels measured only up to 2 run on one
CHECKED_THREADS = 2


def _checked(threads: int) -> bool:
    return threads <= CHECKED_THREADS


def attention_threads(query_rows: int):
    """The thread setting for an attention whose query block has `query_rows` rows: the call's threads where the
    kernel's numbers were measured not to depend on them, else one."""
    import torch

    if query_rows >= SAME_BITS_QUERY_ROWS and _checked(torch.get_num_threads()):
        return nullcontext()
    return one_thread()


class RowMajorLinear:
    """Marker base for `row_major_float_linears`' replacement layers (defined lazily: torch is imported on use)."""


def _onednn_pack(weight):
    """The weight (out x in) in oneDNN's own blocked layout, for `torch.ops.mkldnn._linear_pointwise`, or None where
    this torch has no oneDNN CPU kernels (the layer then computes an addmm). The layout is chosen once, for
    Swift's 10-row beam (the hint only picks the blocking; any number of rows may use it)."""
    import torch

    if weight.device.type != "cpu" or weight.dtype != torch.float32 or not torch.backends.mkldnn.is_available():
        return None
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), 10)
    except (AttributeError, RuntimeError):
        return None


def _float_product(flat, layer):
    """x @ W^T + b of a `row_major_float_linears` layer: oneDNN's kernel on the packed weight where there is one
    (on an AMD EPYC with AVX-512, 10 x 384 -> 2,915 in 0.22 ms against MKL's 0.41; 400 rows 8.5 against 11.4 ms),
    else MKL's addmm over the transposed weight."""
    import torch

    if layer.packed is not None:
        return torch.ops.mkldnn._linear_pointwise(flat, layer.packed, layer.bias, "none", [], "")
    return flat @ layer.weight_t if layer.bias is None else torch.addmm(layer.bias, flat, layer.weight_t)


def row_major_float_linears(model) -> None:
    """Compute every float Linear as one product, in place: over oneDNN's packed layout of the weight where torch
    has oneDNN, on the call's threads; else over the weight transposed and contiguous (in x out) as one addmm, on
    one thread.

    Two reasons. With Swift's small batches (10 beams), torch's `F.linear` takes about twice as long for the output
    layer (10 x 384 -> 2,915 words) as either. And a float product's result may depend on the number of threads:
    MKL splits it differently on 1 and 2 threads (on some CPUs even in the transposed layout: an AMD EPYC gave a
    different last bit for the 10 x 384 -> 384 layer), so the addmm runs on one thread (`one_thread`), as the
    decoder's attention over a few rows does. oneDNN's packed product was measured to give the same bits on 1 and 2
    threads for 1-40, 50, 64, ... 1,000 rows of 384 -> 384, 2,915 and 1,536 and 1,536 -> 384 (torch 2.13.0, AMD EPYC
    with AVX-512; `test_thread_free_kernels_give_the_same_bits` checks it wherever the suite runs on 2 cores), which
    lets the focus scoring's few hundred rows use both cores; on more than `CHECKED_THREADS` it runs on one. The int8
    layers (int32 sums), layer norms and the encoder give the same bits on any thread count too, so Swift may use
    whatever cores are free without changing a single choice (`SwiftModel` picks them per call;
    `test_swift_gives_the_same_numbers_on_one_or_two_threads`). The int8 layers are left alone: call this after
    `quantize_int8`. A packed layer cannot be deep-copied (oneDNN's tensors have no storage); copy the model first."""
    import torch

    class _RowMajor(torch.nn.Module, RowMajorLinear):
        def __init__(self, lin: torch.nn.Linear):
            super().__init__()
            self.in_features, self.out_features = lin.in_features, lin.out_features
            self.weight_t = torch.nn.Parameter(lin.weight.detach().t().contiguous(), requires_grad=False)
            self.bias = None if lin.bias is None else torch.nn.Parameter(lin.bias.detach().clone(), requires_grad=False)
            self.packed = _onednn_pack(lin.weight)  # a plain attribute: not saved, not moved by .to()

        def forward(self, x):
            flat = x.reshape(-1, self.in_features).contiguous()
            if self.packed is not None and _checked(torch.get_num_threads()):  # oneDNN: the same bits on 1 and 2
                y = _float_product(flat, self)
            else:
                with one_thread():
                    y = _float_product(flat, self)
            return y.view(*x.shape[:-1], self.out_features)

    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Linear:
                setattr(parent, name, _RowMajor(child))


def gelu_in_place(model) -> None:
    """The feed-forward's GELU (exact, erf) of every BERT layer computed in place on its input, which is the fresh
    output of the layer before and read by nothing else: the same numbers without a new (tokens x 1,536) tensor
    per layer (0.8 ms of a ~24 ms encoder call, paired A/B over the 72 recorded states). Inference only."""
    import torch
    import torch.nn.functional as F

    class _InPlaceGelu(torch.nn.Module):
        act = staticmethod(torch.ops.aten.gelu_)  # what beam.py's decoder step calls

        def forward(self, x):
            return torch.ops.aten.gelu_(x)

    for mod in list(model.modules()):
        fn = getattr(mod, "intermediate_act_fn", None)
        if type(mod).__name__ == "BertIntermediate" and getattr(fn, "act", None) is F.gelu:
            mod.intermediate_act_fn = _InPlaceGelu()


def quantize_int8(model) -> None:
    """int8 dynamic quantization of the linear layers, in place (weights int8, activations quantized per
    call); the output layer stays float, its logits rank the actions."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation notice for its quantized tensor constructors
        if is_minilm(model):
            model.encoder = torch.ao.quantization.quantize_dynamic(model.encoder, {torch.nn.Linear}, dtype=torch.qint8)
            model.decoder.bert = torch.ao.quantization.quantize_dynamic(model.decoder.bert, {torch.nn.Linear},
                                                                        dtype=torch.qint8)
        else:
            torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
