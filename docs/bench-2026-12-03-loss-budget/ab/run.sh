#!/bin/bash
# The measured A/B of ../README.md: the same build, with the loss budget (the default)
# and without (--max-loss -1), on the 24 held-out Spec-Bench prompts of
# ../../bench-2026-12-02-shadow (4 per category, none in the replay's traces, shuffled),
# cold engines, alternating, one run at a time on an otherwise quiet machine.
#   run.sh v1: four runs with the profile of before the settling pass (7f6b312's parent)
#   run.sh v2: one run each after it (the profile re-measured by `graft tune --if-missing`)
set -e
mkdir -p /tmp/lb
build/graft tune --if-missing
run() {
  build/graft bench --dataset docs/bench-2026-12-02-shadow/hold24-prompts.jsonl --prompt-field turns \
    --category-field category --id-field question_id --methods ar,graft -n 96 --max-prompt-tokens 384 \
    --no-plots "${@:2}" -o "$1"
}
if [ "$1" = v2 ]; then
  run /tmp/lb/v2-budget
  run /tmp/lb/v2-free --max-loss -1
else
  run /tmp/lb/budget1
  run /tmp/lb/free1 --max-loss -1
  run /tmp/lb/budget2
  run /tmp/lb/free2 --max-loss -1
fi
