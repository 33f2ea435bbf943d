"""Turn a packaged GGUF model into Hugging Face safetensors weights that vLLM can serve on a CPU (vLLM's CPU
backend cannot serve GGUF). Runs in the vLLM venv (scripts/vllm_server.sh), whose transformers reads GGUF and
dequantizes it.

    .venv-vllm/bin/python scripts/gguf_to_hf.py GGUF_FILE OUT_DIR [--dtype bfloat16]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    args = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src, out = Path(args.gguf), Path(args.out)
    if (out / "DONE").exists():
        print(f"{out} is ready")
        return
    t0 = time.perf_counter()
    kw = {"gguf_file": src.name}
    tok = AutoTokenizer.from_pretrained(src.parent, **kw)
    model = AutoModelForCausalLM.from_pretrained(src.parent, dtype=getattr(torch, args.dtype), **kw)
    out.mkdir(parents=True, exist_ok=True)
    # the weights are plain tensors now (dequantized on load); drop the GGUF marker so they save as safetensors
    model.hf_quantizer = None
    for holder in (model, model.config):
        for attr in ("quantization_config", "is_quantized", "quantization_method"):
            if attr in getattr(holder, "__dict__", {}):
                delattr(holder, attr)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    (out / "DONE").write_text(json.dumps({"from": str(src), "dtype": args.dtype,
                                          "seconds": round(time.perf_counter() - t0, 1)}))
    print(f"wrote {out} from {src.name} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
