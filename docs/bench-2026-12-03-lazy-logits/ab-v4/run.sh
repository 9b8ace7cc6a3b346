#!/bin/bash
# A/B of lazy logits on hold24 with profile v4 (reads priced); one heavy process at a time.
cd /work/main
B="build/graft bench --dataset docs/bench-2026-12-02-shadow/hold24-prompts.jsonl --prompt-field turns --category-field category --id-field question_id --methods ar,graft -n 96 --max-prompt-tokens 384 --no-plots"

build/graft tune > /tmp/ab5/tune-lazy.txt 2>&1
$B -o /tmp/ab5/lazy1 > /tmp/ab5/lazy1.log 2>&1
$B --no-lazy-logits -o /tmp/ab5/full1 > /tmp/ab5/full1.log 2>&1
$B -o /tmp/ab5/lazy2 > /tmp/ab5/lazy2.log 2>&1
$B --no-lazy-logits -o /tmp/ab5/full2 > /tmp/ab5/full2.log 2>&1
echo done > /tmp/ab5/DONE
