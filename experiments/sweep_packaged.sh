#!/usr/bin/env bash
# The README's sweeps of both packaged models, a few configurations per turn of the shared
# model lock (the sweep resumes where it stopped).
# Usage: [SWEEP_ARGS=--reevaluate] bash experiments/sweep_packaged.sh [smollm2|gemma3|both] [OUT_ROOT]
set -uo pipefail
which=${1:-both}
root=${2:-/work/sweeps}
regress=${REGRESS:-.venv/bin/regress}
read -r -a extra <<< "${SWEEP_ARGS:-}"

sweep() {  # name, then the sweep's own arguments
    local name=$1; shift
    # --stop-after 3 keeps each turn of the lock to a few minutes; go on while a turn says it
    # stopped early, end at the first failure (its message is in the log).
    for _ in $(seq 30); do
        flock /tmp/regress-model.lock "$regress" sweep "$@" "${extra[@]}" -o "$root/$name" \
            --stop-after 3 > "$root/$name.turn" 2>&1
        local status=$?
        cat "$root/$name.turn" >> "$root/$name.log"
        [[ $status -eq 0 ]] || { tail -1 "$root/$name.turn"; return 1; }
        grep -q 'stopped after' "$root/$name.turn" || return 0
        sleep 5
    done
}

mkdir -p "$root"
if [[ $which == smollm2 || $which == both ]]; then
    sweep smollm2 -m smollm2-135m -t arc_easy --limit 150 --ppl-chunks 8 --ppl-ctx 512 \
        --runs 3 \
        --types Q8_0,Q6_K,Q5_K_M,Q5_0,Q4_K_M,Q4_0,IQ4_NL,Q3_K_M,Q3_K_S,Q2_K,IQ3_S
fi
if [[ $which == gemma3 || $which == both ]]; then
    sweep gemma3 -m gemma3-270m -t arc_easy --limit 100 --ppl-chunks 4 --ppl-ctx 512 \
        --runs 3 --config examples/sweep_gemma3.yaml
fi
