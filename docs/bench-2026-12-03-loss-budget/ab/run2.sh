#!/bin/bash
# After the settling pass (profile version 2, re-measured by `graft tune --if-missing`):
# the same A/B as run.sh, once each.
set -e
mkdir -p /tmp/lb
build/graft tune --if-missing
run() {
  build/graft bench --dataset docs/bench-2026-12-02-shadow/hold24-prompts.jsonl --prompt-field turns \
    --category-field category --id-field question_id --methods ar,graft -n 96 --max-prompt-tokens 384 \
    --no-plots "${@:2}" -o "$1"
}
run /tmp/lb/v2-budget
run /tmp/lb/v2-free --max-loss -1
