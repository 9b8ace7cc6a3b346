#!/bin/bash
# The replay table of README.md: per profile, the policy deciding at the profile's prefix
# (--no-context) and at each step's context; every step priced at its context both ways.
#   docs/bench-2026-12-03-context-cost/replay.sh docs/bench-2026-12-03-context-cost/cost-profile-*.json
cd "$(dirname "$0")/../.."
S=docs/bench-2026-12-02-shadow
python3 $S/shuffle.py /tmp/shadow-sets > /dev/null
T=docs/bench-2026-12-02-request-trust/traces
XT=docs/bench-2026-12-01-explore/traces
summary() { python3 docs/bench-2026-12-03-loss-budget/replay_summary.py; }
for p in "$@"; do
  for flags in "--no-context" ""; do
    printf "%-28s %-14s " "$(basename $p .json)" "${flags:-context}"
    for set in "$T/spec60.json $T/code16.json $T/long4.json" "$S/traces/hold24.json" \
               "$XT/spec.json $XT/code.json $XT/long.json" "/tmp/shadow-sets/mix-s2.json"; do
      build/bench/replay_retrieval $flags --profile $p $set
    done | summary
  done
done
