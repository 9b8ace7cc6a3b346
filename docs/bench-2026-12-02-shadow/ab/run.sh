#!/bin/bash
# The measured A/B of README.md: before = d1f98cc (built in a worktree at /tmp/before),
# after = 97dc4ae (build/graft); 24 held-out Spec-Bench prompts (../hold24-prompts.jsonl:
# 4 per category, none in the replay's traces, shuffled), cold engines, one run at a time
# on an otherwise quiet machine. As run: before1, classes1, classes2 (the prompt-class
# variant, not kept: prompt-classes-not-kept.diff), before2, then shadow1, before3, shadow2.
set -e
run() {
  "$1" bench --dataset docs/bench-2026-12-02-shadow/hold24-prompts.jsonl --prompt-field turns \
    --category-field category --id-field question_id --methods ar,graft -n 96 --max-prompt-tokens 384 \
    --no-plots -o "$2"
}
run /tmp/before/build/graft /tmp/hold/before1
run build/graft /tmp/hold/shadow1
run /tmp/before/build/graft /tmp/hold/before3
run build/graft /tmp/hold/shadow2
