#!/usr/bin/env bash
# Record the example episodes shipped under assets/episodes/ (Swift + Sage on the embedded default LLM),
# so a teacher can demo recorded runs without waiting for a model. Takes a while on a CPU.
#   bash scripts/record_examples.sh [STEP_LIMIT] [OUT_DIR]    (THREADS=1 when the other core is busy)
# Three Baseline episodes and the same chemistry episode under +SRM (Gate-1, stagnation detector, Critic).
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=${1:-30}  # the shipped examples used 30
OUT=${2:-assets/episodes}
mkdir -p "$OUT"
for spec in "lifespan-longest-lived 0 baseline" "find-non-living-thing 0 baseline" \
            "chemistry-mix-paint-secondary-color 0 baseline" "chemistry-mix-paint-secondary-color 0 srm"; do
  set -- $spec
  var=$(.venv/bin/python -c "from agent_core.env import catalog; print(catalog().get('$1').test[$2])")
  .venv/bin/python -m agent_core.run --task "$1" --variation "$var" --split test --llm embedded \
      --max-steps "$LIMIT" --runs-dir "$OUT" --preset "$3" --set llm.n_threads="${THREADS:-2}"
done
ls -la "$OUT"
