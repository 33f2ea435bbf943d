#!/usr/bin/env bash
# Install everything (see setup.sh) and start the app on http://127.0.0.1:8501 (offline, CPU).
#
#   bash scripts/app.sh                    # only this machine can open it (binds 127.0.0.1)
#   bash scripts/app.sh --share            # a classroom: bind every interface (0.0.0.0), locked (docs/CLASSROOM.md):
#                                          #   the LLM, key and folders are yours, visitors watch, follow and replay
#   bash scripts/app.sh --share --passcode # ... and print a teacher passcode that unlocks runs in one browser
#   bash scripts/app.sh --share --config class.toml   # the class's settings from a file (LLM, passcode, memory roots)
#   bash scripts/app.sh --share --host class.example.org   # also answer to this name (repeat for more; always:
#                                          #   this machine's addresses and names; SWIFTSAGE_HOSTS='*' answers to any)
#   bash scripts/app.sh --port 8600        # another port; other arguments go to `streamlit run`
#   SWIFTSAGE_ADDRESS=10.0.0.5 bash scripts/app.sh   # bind one chosen address (not loopback: shared, so locked)
#
# The operator's settings can also come from the environment: SWIFTSAGE_LLM_BACKEND (embedded | openai),
# SWIFTSAGE_LLM_BASE_URL, SWIFTSAGE_LLM_MODEL, SWIFTSAGE_LLM_API_KEY, SWIFTSAGE_LLM_THREADS,
# SWIFTSAGE_DEFAULT_EMBEDDED_MODEL, SWIFTSAGE_PASSCODE, SWIFTSAGE_MEMORY_ROOTS, SWIFTSAGE_VISITORS_ASK_MODEL,
# SWIFTSAGE_HOSTS (with --share: more names the class may use), SWIFTSAGE_UNLOCK_MINUTES, SWIFTSAGE_VISITOR_CALLS_PER_BROWSER, SWIFTSAGE_VISITOR_CALLS_PER_HOUR,
# SWIFTSAGE_VISITOR_QUEUE (docs/CLASSROOM.md).
#
# Streamlit's file watcher is off (`--server.fileWatcherType none`): on a small machine it floods the log
# with "Inotify queue overflowed" and burns a core; the app does not edit its own source.
set -euo pipefail
cd "$(dirname "$0")/.."
ADDRESS=${SWIFTSAGE_ADDRESS:-127.0.0.1}
PORT=8501
ARGS=()
MAKE_PASSCODE=0
HOSTS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --share) ADDRESS=0.0.0.0 ;;
    --port) PORT=$2; shift ;;
    --config) export SWIFTSAGE_APP_CONFIG=$(realpath "$2"); shift ;;
    --passcode) MAKE_PASSCODE=1 ;;
    --host) HOSTS+=("$2"); shift ;;
    *) ARGS+=("$1") ;;
  esac
  shift
done
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
case "$ADDRESS" in
  127.*|localhost|::1) ;;
  *) export SWIFTSAGE_SHARE=1 ;;
esac
if [ "$MAKE_PASSCODE" = 1 ] && [ -z "${SWIFTSAGE_PASSCODE:-}" ]; then
  SWIFTSAGE_PASSCODE=$(.venv/bin/python -c 'import secrets; print(secrets.token_hex(6))')
  export SWIFTSAGE_PASSCODE
fi
if [ "${SWIFTSAGE_SHARE:-0}" = 1 ]; then
  # the names a class may open the app under: this machine's addresses and names, those given with --host, and
  # SWIFTSAGE_HOSTS (comma-separated; '*' = any). Streamlit refuses a page's connection for any other name (a page
  # elsewhere whose name was made to resolve here: DNS rebinding); locally, .streamlit/config.toml allows loopback only
  IFS=, read -r -a EXTRA <<< "${SWIFTSAGE_HOSTS:-}"
  HOSTS+=(${EXTRA[@]+"${EXTRA[@]}"} localhost 127.0.0.1 ::1 $(hostname -I 2>/dev/null || true))
  HOSTS+=("$(hostname 2>/dev/null || true)" "$(hostname -f 2>/dev/null || true)" "$(hostname 2>/dev/null || true).local")
  for h in "${HOSTS[@]}"; do
    h=$(echo "$h" | tr -d '[:space:]')
    [ -n "$h" ] && [ "$h" != ".local" ] && ARGS+=(--server.allowedHosts "$h")
  done
fi
.venv/bin/python -m views.share >&2 || exit 2   # the operator's settings, checked before anything is served
if [ "${SWIFTSAGE_SHARE:-0}" = 1 ]; then
  echo "[app] serving on $ADDRESS:$PORT: anyone who can reach this machine can open the app; it is locked:" \
       "visitors watch, follow, replay, compare and ask; runs need the teacher passcode" >&2
  for ip in $(hostname -I 2>/dev/null || true); do
    case "$ip" in *:*) ip="[$ip]" ;; esac
    echo "[app] class link: http://$ip:$PORT/?follow=live" >&2
  done
  [ -n "${SWIFTSAGE_PASSCODE:-}" ] && [ "$MAKE_PASSCODE" = 1 ] && echo "[app] teacher passcode: $SWIFTSAGE_PASSCODE" >&2
fi
if [ "${SWIFTSAGE_SHARE:-0}" = 1 ]; then
  ARGS+=(--client.showErrorDetails none)  # a visitor sees a plain message for an error, never a traceback
fi
exec .venv/bin/streamlit run app.py --server.headless true --browser.gatherUsageStats false \
  --server.address "$ADDRESS" --server.port "$PORT" --server.fileWatcherType none ${ARGS[@]+"${ARGS[@]}"}
