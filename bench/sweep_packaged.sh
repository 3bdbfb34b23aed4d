#!/usr/bin/env bash
# The README's sweeps of both packaged models, a few configurations per turn of the shared
# model lock (the sweep resumes where it stopped).
# Usage: bash bench/sweep_packaged.sh [smollm2|gemma3|both] [OUT_ROOT]
set -uo pipefail
which=${1:-both}
root=${2:-/work/sweeps}
regress=${REGRESS:-.venv/bin/regress}
export OMP_WAIT_POLICY=PASSIVE

sweep() {  # name, then the sweep's own arguments
    local name=$1; shift
    # --stop-after 3 keeps each turn of the lock to a few minutes; stop when nothing is left
    # to measure, or at the first failure (its message is in the log).
    for _ in $(seq 20); do
        flock /tmp/regress-model.lock "$regress" sweep "$@" -o "$root/$name" --stop-after 3 \
            2>&1 | tee -a "$root/$name.log" | tail -1 > "$root/$name.last" || return 1
        grep -q ', 0 to go in' "$root/$name.last" && return 0
        sleep 5
    done
}

mkdir -p "$root"
if [[ $which == smollm2 || $which == both ]]; then
    sweep smollm2 -m smollm2-135m -t arc_easy --limit 150 --ppl-chunks 8 --ppl-ctx 512 \
        --bench-runs 3 \
        --types Q8_0,Q6_K,Q5_K_M,Q5_0,Q4_K_M,Q4_0,IQ4_NL,Q3_K_M,Q3_K_S,Q2_K,IQ3_S
fi
if [[ $which == gemma3 || $which == both ]]; then
    sweep gemma3 -m gemma3-270m -t arc_easy --limit 100 --ppl-chunks 4 --ppl-ctx 512 \
        --bench-runs 3 --config examples/sweep_gemma3.yaml
fi
