#!/bin/bash
# The replay table of README.md: per profile, the policy deciding at the profile's prefix
# (--no-context) and at each step's context; every step priced at its context both ways.
#   docs/bench-2026-12-03-context-cost/replay.sh docs/bench-2026-12-03-context-cost/cost-profile-*.json
cd "$(dirname "$0")/../.."
for p in "$@"; do
  for flags in "--no-context" ""; do
    printf "%-28s %-14s " "$(basename $p .json)" "${flags:-context}"
    docs/bench-2026-12-03-loss-budget/replay_164.sh $p $flags
  done
done
