#!/usr/bin/env bash
# Install everything (see setup.sh) and run the tests (docs/TESTING.md):
#   bash scripts/test.sh              the whole suite, slow tests included, on 2 pytest-xdist workers (what CI runs)
#   bash scripts/test.sh --fast       the fast tier: every test that starts no JVM, model, page, browser or
#                                     server, plus one real-JVM and one real-page smoke test (about a minute)
# Further arguments go to pytest (e.g. bash scripts/test.sh --fast -x, bash scripts/test.sh tests/test_env.py -n 0).
set -euo pipefail
cd "$(dirname "$0")/.."
FAST=0
if [ "${1:-}" = "--fast" ]; then FAST=1; shift; fi
bash scripts/setup.sh --tests
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False
if [ $FAST = 1 ]; then
  exec .venv/bin/python -m pytest -q -m "fast or not (slow or jvm or model or page or browser or server)" "$@"
fi
# two workers: 15.6 min instead of 20.5 for the whole suite (docs/TESTING.md); loadgroup keeps the tests of one
# xdist_group (a shared evaluation, a module's server or loaded model) on one worker
# --durations: the slowest tests are printed with the result, so a slow CI run says where its time went
exec .venv/bin/python -m pytest -q -n 2 --dist loadgroup --durations=25 "$@"
