#!/usr/bin/env bash
# Record the example episodes shipped under assets/episodes/ (Swift + Sage on the embedded default LLM),
# so a teacher can demo recorded runs without waiting for a model. Takes a while on a CPU.
#   bash scripts/record_examples.sh [STEP_LIMIT] [OUT_DIR] ["task test-index preset" ...]
#   (THREADS=1 when the other core is busy)
# Default: three Baseline episodes, the same chemistry episode under +SRM, +AMM and Full. The memory
# presets start from a fresh copy of the shipped warm store (amm.store_dir under a temporary folder), so the
# recorded retrievals are what any fresh install would see.
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=${1:-30}  # the shipped examples used 30
OUT=${2:-assets/episodes}
shift $(( $# > 2 ? 2 : $# ))
SPECS=("$@")
if [ ${#SPECS[@]} -eq 0 ]; then
  SPECS=("lifespan-longest-lived 0 baseline" "find-non-living-thing 0 baseline"
         "chemistry-mix-paint-secondary-color 0 baseline" "chemistry-mix-paint-secondary-color 0 srm"
         "chemistry-mix-paint-secondary-color 0 amm" "chemistry-mix-paint-secondary-color 0 full")
fi
mkdir -p "$OUT"
STORES=$(mktemp -d)
for spec in "${SPECS[@]}"; do
  set -- $spec
  var=$(.venv/bin/python -c "from agent_core.env import catalog; print(catalog().get('$1').test[$2])")
  .venv/bin/python -m agent_core.run --task "$1" --variation "$var" --split test --llm embedded \
      --max-steps "$LIMIT" --runs-dir "$OUT" --preset "$3" --set llm.n_threads="${THREADS:-2}" \
      --set amm.store_dir="$STORES/$1-$3" --set amm.reflection=off
done
rm -rf "$STORES"
ls -la "$OUT"
