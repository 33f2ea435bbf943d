#!/usr/bin/env bash
# Install everything (see setup.sh) and start the app on http://127.0.0.1:8501 (offline, CPU).
#
#   bash scripts/app.sh                    # only this machine can open it (binds 127.0.0.1)
#   bash scripts/app.sh --share            # a classroom: bind every interface (0.0.0.0), students open
#                                          #   http://<this machine's address>:8501
#   bash scripts/app.sh --port 8600        # another port; other arguments go to `streamlit run`
#   SWIFTSAGE_ADDRESS=10.0.0.5 bash scripts/app.sh   # bind one chosen address
#
# Streamlit's file watcher is off (`--server.fileWatcherType none`): on a small machine it floods the log
# with "Inotify queue overflowed" and burns a core; the app does not edit its own source.
set -euo pipefail
cd "$(dirname "$0")/.."
ADDRESS=${SWIFTSAGE_ADDRESS:-127.0.0.1}
PORT=8501
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --share) ADDRESS=0.0.0.0 ;;
    --port) PORT=$2; shift ;;
    *) ARGS+=("$1") ;;
  esac
  shift
done
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
[ "$ADDRESS" = 127.0.0.1 ] || echo "[app] serving on $ADDRESS:$PORT: anyone who can reach this machine can use the app" >&2
exec .venv/bin/streamlit run app.py --server.headless true --browser.gatherUsageStats false \
  --server.address "$ADDRESS" --server.port "$PORT" --server.fileWatcherType none ${ARGS[@]+"${ARGS[@]}"}
