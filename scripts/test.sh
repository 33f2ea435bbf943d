#!/usr/bin/env bash
# Install everything (see setup.sh) and run the whole test suite, slow tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
exec .venv/bin/python -m pytest -q "$@"
