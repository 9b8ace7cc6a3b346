#!/usr/bin/env bash
# graft serve under load on this machine (issue 12's figures): --parallel 8 on the
# default pair, a fresh server per method, 1 and 8 concurrent streaming clients, 128
# tokens, greedy, Spec-Bench prompts (tests/server/load.py). One server at a time on
# an otherwise quiet machine.
# after = 44f3995 (graft's draft offers under load; the gate's retrieval arm learns
# only from passes of its own); before = a6c2f42 (`git worktree add /tmp/old a6c2f42`,
# cmake Release, target graft).
set -u
cd "$(dirname "$0")/../.."
OUT=docs/bench-2026-12-02-offers
CLIENTS=${CLIENTS:-1 8}
wait_up() { for i in $(seq 1 600); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 1; done; return 1; }
run() {  # label binary port method
  "$2" serve --parallel 8 --port "$3" > "$OUT/$1-$4.server.log" 2>&1 & pid=$!
  if wait_up "$3"; then
    .venv/bin/python tests/server/load.py --url "http://127.0.0.1:$3" --methods "$4" --clients $CLIENTS \
      --max-tokens 128 --label "$1-$4" --json "$OUT/load.jsonl" 2>&1 | tee -a "$OUT/load.txt"
    curl -s "http://127.0.0.1:$3/metrics" | grep -E "^graft_(steps_total|target_passes_total|draft_passes_total|step_draft_passes_total|busy_seconds_total|step_seconds_total|generated_tokens_total)" \
      | sed "s/^/$1-$4 /" >> "$OUT/metrics.txt"
  fi
  kill -INT $pid; wait $pid
}
echo "start $(date -u +%FT%TZ) $(lscpu | grep 'Model name' | sed 's/  */ /g')" >> "$OUT/load.txt"
run after build/graft 8301 ar
run after build/graft 8302 graft
run before /tmp/old/build/graft 8303 graft
echo "end $(date -u +%FT%TZ)" >> "$OUT/load.txt"
