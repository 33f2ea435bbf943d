#!/usr/bin/env bash
# Continue training the shipped Swift on one CUDA GPU (bf16 autocast), as was done for the shipped model
# on an H200 (see assets/swift/MODEL_CARD.md). Starts from assets/swift/model, unfreezes the whole
# pretrained encoder and trains for MINUTES of wall time with large length-grouped batches, exporting the
# best-dev-loss checkpoint to runs/swift_gpu_out/ (ship it with: cp -r runs/swift_gpu_out/. assets/swift/).
# The export is also packed into PACK_DIR as <16 MB pieces (cat swift_gpu_out.tgz.part-* | tar xz).
# The shipped model is this script run once on the CPU-trained export (the model card's Reproduce section
# lists both stages in order); run on the shipped model itself, it trains that further.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
MINUTES=${MINUTES:-6.5}
# EXTRA: more trainer flags, placed after the fixed ones (a later flag wins; budget, --work and --out stay),
# e.g. a small CPU dry run:
#   EXTRA="--limit-train 256 --batch-tokens 8000 --max-batch 16" MINUTES=1.5 PYTHON=.venv/bin/python bash scripts/train_swift_gpu.sh
PACK_DIR=${PACK_DIR:-runs/swift_gpu_pack}
mkdir -p "$PACK_DIR"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
nvidia-smi -L || true
$PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
$PY -m agent_core.swift.train --init-from assets/swift/model --freeze-layers 0 --encoder-lr-scale 0.1 \
    --lr 1e-3 --warmup 200 --max-input 512 --batch-tokens 48000 --max-batch 128 --eval-every 400 \
    --dev-pairs 1500 --exact-pairs 400 --epochs 60 ${EXTRA:-} --max-minutes "$MINUTES" --patience 8 \
    --work runs/swift_gpu --out runs/swift_gpu_out/model 2>&1 | tee "$PACK_DIR/train.log"
status=${PIPESTATUS[0]}
if [ -d runs/swift_gpu_out/model ]; then
    tar -C runs/swift_gpu_out -czf - . | split -b 15m - "$PACK_DIR/swift_gpu_out.tgz.part-"
fi
ls -la "$PACK_DIR"
exit "$status"
