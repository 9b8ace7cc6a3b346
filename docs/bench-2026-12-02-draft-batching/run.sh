#!/usr/bin/env bash
# Draft batching across requests (issue 12): graft serve --parallel 4 on the default
# pair, a fresh server per (binary, method), 1 / 2 / 4 concurrent streaming clients,
# 96 tokens, greedy, Spec-Bench prompts (tests/server/load.py).
# before = 85b283c (`git worktree add /tmp/old 85b283c`, cmake Release, target graft):
# a draft context per slot, each request's draft levels in passes of their own.
# after = this commit: one draft context with a lane per slot, shared draft passes.
# One server at a time on an otherwise quiet machine.
set -u
cd "$(dirname "$0")/../.."
OUT=docs/bench-2026-12-02-draft-batching
CLIENTS=${CLIENTS:-1 2 4}
wait_up() { for i in $(seq 1 600); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 1; done; return 1; }
run() {  # label binary port method
  "$2" serve --parallel 4 --port "$3" > "$OUT/$1-$4.server.log" 2>&1 & pid=$!
  if wait_up "$3"; then
    .venv/bin/python tests/server/load.py --url "http://127.0.0.1:$3" --methods "$4" --clients $CLIENTS \
      --max-tokens 96 --label "$1-$4" --json "$OUT/load.jsonl" 2>&1 | tee -a "$OUT/load.txt"
    curl -s "http://127.0.0.1:$3/metrics" | grep -E "^graft_(steps|target_passes|draft_passes|step_draft_passes|busy_seconds)_total" \
      | sed "s/^/$1-$4 /" >> "$OUT/metrics.txt"
  fi
  kill -INT $pid; wait $pid
}
echo "start $(date -u +%FT%TZ) $(lscpu | grep 'Model name' | sed 's/  */ /g')" >> "$OUT/load.txt"
run after build/graft 8201 chain
run before /tmp/old/build/graft 8202 chain
run after build/graft 8203 pruned
run before /tmp/old/build/graft 8204 pruned
run after build/graft 8205 ar
echo "end $(date -u +%FT%TZ)" >> "$OUT/load.txt"
