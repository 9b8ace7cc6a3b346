#!/bin/bash
# A/B of lazy logits on hold24; one heavy process at a time.
cd /work/main
B="build/graft bench --dataset docs/bench-2026-12-02-shadow/hold24-prompts.jsonl --prompt-field turns --category-field category --id-field question_id --methods ar,graft -n 96 --max-prompt-tokens 384 --no-plots"
build/graft tune --no-lazy-logits > /tmp/ab/tune-full.txt 2>&1
build/graft tune > /tmp/ab/tune-lazy.txt 2>&1
for i in 1 2; do
  $B -o /tmp/ab/lazy$i > /tmp/ab/lazy$i.log 2>&1
  $B --no-lazy-logits -o /tmp/ab/full$i > /tmp/ab/full$i.log 2>&1
done
echo done > /tmp/ab/DONE
