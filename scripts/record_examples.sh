#!/usr/bin/env bash
# Record the example episodes shipped under assets/episodes/ (Swift + Sage on the embedded default LLM),
# so a teacher can demo recorded runs without waiting for a model. Takes a while on a CPU.
#   bash scripts/record_examples.sh [STEP_LIMIT] [OUT_DIR] ["task test-index preset" ...]
#   (THREADS=1 when the other core is busy)
# Default: the examples shipped in assets/episodes (docs/RUN_PAGE.md): four Baseline episodes and the tour's
# inclined-plane episode under +AMM, +SRM and Full. The memory presets start from a fresh copy of the shipped warm
# store in runs/example-stores/ (kept, so the Memory explorer can open it on the machine that recorded; the trace
# names it relative to the project, and elsewhere the page says the store is not on this machine), so the recorded
# retrievals are what any fresh install would see.
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=${1:-30}  # the shipped examples used 30
OUT=${2:-assets/episodes}
shift $(( $# > 2 ? 2 : $# ))
SPECS=("$@")
if [ ${#SPECS[@]} -eq 0 ]; then
  SPECS=("lifespan-longest-lived 0 baseline" "find-non-living-thing 0 baseline"
         "chemistry-mix-paint-secondary-color 0 baseline" "inclined-plane-friction-named-surfaces 0 baseline"
         "inclined-plane-friction-named-surfaces 0 amm" "inclined-plane-friction-named-surfaces 0 srm"
         "inclined-plane-friction-named-surfaces 0 full")
fi
mkdir -p "$OUT"
STORES=runs/example-stores
for spec in "${SPECS[@]}"; do
  set -- $spec
  var=$(.venv/bin/python -c "from agent_core.env import catalog; print(catalog().get('$1').test[$2])")
  rm -rf "$STORES/$1-v$var-$3"  # a fresh copy of the warm store, never a store an earlier recording wrote
  .venv/bin/python -m agent_core.run --task "$1" --variation "$var" --split test --llm embedded \
      --max-steps "$LIMIT" --runs-dir "$OUT" --preset "$3" --set llm.n_threads="${THREADS:-2}" \
      --set amm.store_dir="$STORES/$1-v$var-$3" --set amm.reflection=off
done
ls -la "$OUT"
