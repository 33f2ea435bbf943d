"""Swift's encoder under ONNX Runtime against the shipped torch int8 encoder, on one ~300-token input (the size of a
Swift step's input), 1 and 2 threads: is ONNX Runtime a way to bring a Swift step within 2x of the game's step?

ONNX Runtime is already installed (chromadb depends on it); exporting the model needs the `onnx` package, which
the app does not, so it is installed beside the venv for this benchmark only:

    .venv/bin/python -m pip install --target /tmp/onnx-pkgs onnx==1.23.2
    .venv/bin/python benchmarks/encoder_onnx.py --onnx-path /tmp/onnx-pkgs

It exports the float encoder (torch.onnx, opset 17), quantizes it with ONNX Runtime's dynamic int8 quantization,
once as exported and once after ONNX Runtime's BERT graph optimizer, and prints the p50 of 30 calls of each next to
the shipped encoder (`SwiftModel(quantize="int8")`), with each one's largest difference from the float encoder's
output.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere


def p50_ms(fn, n: int = 30) -> float:
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--onnx-path", default="", help="a folder holding the `onnx` package (appended to sys.path)")
    ap.add_argument("--tokens", type=int, default=302)
    args = ap.parse_args()
    if args.onnx_path:
        sys.path.append(args.onnx_path)  # appended: the venv's own numpy and protobuf come first
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    from agent_core.swift.model import DEFAULT_DIR, SwiftModel, load_seq2seq

    class Encoder(torch.nn.Module):
        def __init__(self, enc):
            super().__init__()
            self.enc = enc

        def forward(self, input_ids, attention_mask):
            return self.enc(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    # the checkpoint's own float encoder (SwiftModel's holds oneDNN's packed weights, which ONNX cannot export)
    float_enc = Encoder(load_seq2seq(DEFAULT_DIR)[1].encoder).eval()
    int8_enc = Encoder(SwiftModel(quantize="int8").model.encoder).eval()
    vocab = float_enc.enc.config.vocab_size
    ids = torch.randint(100, vocab - 1, (1, args.tokens), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        ref = float_enc(ids, mask)
    tmp = Path(tempfile.mkdtemp(prefix="encoder-onnx-"))
    torch.onnx.export(float_enc, (ids, mask), str(tmp / "enc.onnx"), input_names=["input_ids", "attention_mask"],
                      output_names=["h"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": {1: "n"}, "attention_mask": {1: "n"}, "h": {1: "n"}})
    quantize_dynamic(str(tmp / "enc.onnx"), str(tmp / "enc_int8.onnx"), weight_type=QuantType.QInt8)
    opt = optimizer.optimize_model(str(tmp / "enc.onnx"), model_type="bert", num_heads=0, hidden_size=0)
    opt.save_model_to_file(str(tmp / "enc_opt.onnx"))
    fused = {k: v for k, v in opt.get_fused_operator_statistics().items() if v}
    quantize_dynamic(str(tmp / "enc_opt.onnx"), str(tmp / "enc_opt_int8.onnx"), weight_type=QuantType.QInt8,
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
    print(f"input: {args.tokens} tokens; ONNX Runtime {ort.__version__}; BERT optimizer fused: {fused or 'nothing'}")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        with torch.no_grad():
            rows = [("torch int8 (shipped)", p50_ms(lambda: int8_enc(ids, mask)),
                     (int8_enc(ids, mask) - ref).abs().max().item())]
        for label, name in (("ONNX Runtime int8", "enc_int8.onnx"),
                            ("ONNX Runtime int8, optimized", "enc_opt_int8.onnx")):
            sess = ort.InferenceSession(str(tmp / name), so, providers=["CPUExecutionProvider"])
            out = torch.from_numpy(np.asarray(sess.run(None, feed)[0]))
            rows.append((label, p50_ms(lambda: sess.run(None, feed)), (out - ref).abs().max().item()))
        for label, ms, diff in rows:
            print(f"{threads} thread(s)  {label:30s} p50 {ms:6.1f} ms   largest difference from float {diff:.3f}")


if __name__ == "__main__":
    main()
