#!/bin/bash
# replay_164.sh PROFILE [replay_retrieval flags...]: the modelled speedup over ar of the
# 164 recorded outputs (spec60 code16 long4 of the request-trust traces, hold24, the
# Xeon's spec30 code12 long3, mix-s2) under PROFILE, one line (replay_summary.py).
# Run from the repository root after a build; used by replay.sh here and in
# ../bench-2026-12-03-context-cost.
set -e
p=$1
shift
S=docs/bench-2026-12-02-shadow
T=docs/bench-2026-12-02-request-trust/traces
XT=docs/bench-2026-12-01-explore/traces
[ -f /tmp/shadow-sets/mix-s2.json ] || python3 $S/shuffle.py /tmp/shadow-sets > /dev/null
for set in "$T/spec60.json $T/code16.json $T/long4.json" "$S/traces/hold24.json" \
           "$XT/spec.json $XT/code.json $XT/long.json" "/tmp/shadow-sets/mix-s2.json"; do
  build/bench/replay_retrieval "$@" --profile $p $set
done | python3 docs/bench-2026-12-03-loss-budget/replay_summary.py
