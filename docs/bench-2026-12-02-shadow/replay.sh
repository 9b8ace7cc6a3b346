#!/bin/bash
# The replay tables of README.md: modelled speedup over ar, per set of recorded outputs,
# under three machines' profiles. Run from the repository root after a build.
set -e
D=docs/bench-2026-12-02-shadow
python3 $D/shuffle.py /tmp/shadow-sets
T=docs/bench-2026-12-02-request-trust/traces
XT=docs/bench-2026-12-01-explore/traces
S=/tmp/shadow-sets
SETS="$T/ab25.json $T/spec60.json $T/code16.json $T/long4.json $XT/spec.json $XT/code.json $XT/long.json $S/spec60-s1.json $S/spec60-s2.json $S/ab25-s2.json $S/mix-s1.json $S/mix-s2.json $D/traces/hold24.json"
PROFILES="docs/bench-2026-12-01-siblings/cost-profile-2026-12-02.json docs/bench-2026-12-02-request-trust/cost-profile-epyc-now.json docs/bench-2026-12-02-draft-batching/cost-profile-epyc-2026-12-02.json"
echo "# sets: ab25 spec60 code16 long4 xeon-spec30 xeon-code12 xeon-long3 spec60-s1 spec60-s2 ab25-s2 mix-s1 mix-s2 hold24"
for flags in "--no-shadow" "" "--no-shadow --explore 0" "--explore 0"; do
  for p in $PROFILES; do
    printf "%-28s %-24s" "$(basename $p .json)" "${flags:-shadow}"
    for s in $SETS; do build/bench/replay_retrieval $flags --profile $p $s | tail -1 | awk '{printf " %s", $5}'; done
    echo
  done
done
echo
echo "# --perfect (the policy knows the output), geometric mean per category of spec60 + code16 + long4"
for p in $PROFILES; do
  for flags in "" "--perfect"; do
    printf "%-28s %-10s" "$(basename $p .json)" "${flags:-graft}"
    build/bench/replay_retrieval $flags --profile $p $T/spec60.json $T/code16.json $T/long4.json | python3 -c "
import sys, math, collections
c = collections.defaultdict(list)
for l in sys.stdin:
    w = l.split()
    if len(w) == 5 and '/' in w[0]: c[w[0].split('/')[0]].append(float(w[4].rstrip('x')))
print(''.join(' %s %.2f' % (k, math.exp(sum(map(math.log, v)) / len(v))) for k, v in c.items()))"
  done
done
