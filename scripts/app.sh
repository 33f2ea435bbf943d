#!/usr/bin/env bash
# Install everything (see setup.sh) and start the app on http://localhost:8501 (offline, CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
exec .venv/bin/streamlit run app.py --server.headless true --browser.gatherUsageStats false "$@"
