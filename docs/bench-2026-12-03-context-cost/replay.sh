#!/bin/bash
cd "$(dirname "$0")/../.."
S=docs/bench-2026-12-02-shadow
python3 $S/shuffle.py /tmp/shadow-sets > /dev/null
T=docs/bench-2026-12-02-request-trust/traces
XT=docs/bench-2026-12-01-explore/traces
summary() {
  python3 -c "
import sys, math, collections
c = collections.defaultdict(list); v = []
for l in sys.stdin:
    w = l.split()
    if len(w) == 5 and '/' in w[0]:
        x = float(w[4].rstrip('x')); c[w[0].split('/')[0]].append(x); v.append(x)
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
print('all %.3f  min %.2f  below 0.95: %2d  |' % (g(v), min(v), sum(x < .95 for x in v)),
      ' '.join('%s %.2f' % (k[:5], g(x)) for k, x in sorted(c.items())))"
}
for p in "$@"; do
  for flags in "--no-context" ""; do
    printf "%-28s %-14s " "$(basename $p .json)" "${flags:-context}"
    for set in "$T/spec60.json $T/code16.json $T/long4.json" "$S/traces/hold24.json" \
               "$XT/spec.json $XT/code.json $XT/long.json" "/tmp/shadow-sets/mix-s2.json"; do
      build/bench/replay_retrieval $flags --profile $p $set
    done | summary
  done
done
