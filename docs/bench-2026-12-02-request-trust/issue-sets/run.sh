#!/usr/bin/env bash
# Before (5459707: learned state, no trust per request) and after (HEAD) on the sets,
# cold engines, one run at a time. Usage: run.sh BEFORE_GRAFT AFTER_GRAFT OUT
set -eu
B=$1 A=$2 OUT=$3
D=/work/shared/data
for who in before after; do
  G=$B; [ $who = after ] && G=$A
  $G bench --dataset spec_bench --data-dir $D --per-category 5 --methods ar,graft --oracle --budgets 16 -n 96 \
    --max-prompt-tokens 384 --no-plots -o $OUT/$who-spec > $OUT/$who-spec.log 2>&1
  $G bench --dataset code_edit --data-dir $D --max-prompts 6 --methods ar,graft --oracle --budgets 16 -n 128 \
    --max-prompt-tokens 1024 --no-plots -o $OUT/$who-code > $OUT/$who-code.log 2>&1
  $G bench --dataset long --data-dir $D --max-prompts 3 --methods ar,graft --oracle --budgets 16 -n 96 \
    --max-prompt-tokens 1024 --no-plots -o $OUT/$who-long > $OUT/$who-long.log 2>&1
done
