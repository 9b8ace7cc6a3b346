#!/bin/bash
# The replay tables of README.md: modelled speedup over ar with and without the loss
# budget, under three machines' profiles. Run from the repository root after a build.
set -e
S=docs/bench-2026-12-02-shadow
python3 $S/shuffle.py /tmp/shadow-sets > /dev/null
T=docs/bench-2026-12-02-request-trust/traces
XT=docs/bench-2026-12-01-explore/traces
PROFILES="docs/bench-2026-12-01-siblings/cost-profile-2026-12-02.json docs/bench-2026-12-02-request-trust/cost-profile-epyc-now.json docs/bench-2026-12-02-draft-batching/cost-profile-epyc-2026-12-02.json docs/bench-2026-12-03-loss-budget/cost-profile-epyc-2026-12-03.json docs/bench-2026-12-03-loss-budget/cost-profile-epyc-2026-12-03-v2.json"
# Per profile and setting: geometric mean over every prompt of the 164 outputs
# (replay_164.sh), the slowest prompt, how many ran below 0.95x, and the geometric mean
# per category.
echo "# prompts: spec60 code16 long4 (request-trust traces), hold24, the Xeon's spec30 code12 long3, mix-s2 (164 outputs)"
for p in $PROFILES; do
  for flags in "--max-loss -1" "" "--max-loss 0.03 --loss-grant 3" "--max-loss 0.05 --loss-grant 1"; do
    printf "%-16s %-30s " "$(basename $p .json | cut -c14-)" "${flags:-budget 0.02, grant 2}"
    docs/bench-2026-12-03-loss-budget/replay_164.sh $p $flags
  done
done
echo
echo "# the 13 sets of ../bench-2026-12-02-shadow (ab25 spec60 code16 long4 xeon-spec30 xeon-code12 xeon-long3 spec60-s1 spec60-s2 ab25-s2 mix-s1 mix-s2 hold24), overall speedup"
SETS="$T/ab25.json $T/spec60.json $T/code16.json $T/long4.json $XT/spec.json $XT/code.json $XT/long.json /tmp/shadow-sets/spec60-s1.json /tmp/shadow-sets/spec60-s2.json /tmp/shadow-sets/ab25-s2.json /tmp/shadow-sets/mix-s1.json /tmp/shadow-sets/mix-s2.json $S/traces/hold24.json"
for p in $PROFILES; do
  for flags in "--max-loss -1" ""; do
    printf "%-16s %-16s" "$(basename $p .json | cut -c14-)" "${flags:-budget}"
    for s in $SETS; do build/bench/replay_retrieval $flags --profile $p $s | tail -1 | awk '{printf " %s", $5}'; done
    echo
  done
done
