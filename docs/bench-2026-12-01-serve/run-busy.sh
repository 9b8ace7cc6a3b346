#!/usr/bin/env bash
# graft-before: `git worktree add /tmp/old e18607d` built with cmake -DCMAKE_BUILD_TYPE=Release (target graft_cli).
# The same servers with a competing CPU load: one `yes > /dev/null` for the whole run.
set -u
cd /work/main
OUT=docs/bench-2026-12-01-serve
M=~/.cache/graft/models
PEERS=~/.cache/graft/peers/llama-cpp-python-0.3.36/bin
CLIENTS="1 8"
wait_up() { for i in $(seq 1 300); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 1; done; return 1; }
load() {
  .venv/bin/python tests/server/load.py --url "http://127.0.0.1:$2" --methods "$3" --clients $CLIENTS \
    --max-tokens 128 --label "$1" --json "$OUT/load-busy.jsonl" 2>&1 | tee -a "$OUT/load-busy.txt"
}
run_graft() {
  "$2" serve --parallel 8 --port "$3" > /dev/null 2>&1 & pid=$!
  wait_up "$3" && load "$1" "$3" "$4"
  kill -INT $pid; wait $pid
}
yes > /dev/null & yes_pid=$!
echo "start $(date -u +%FT%TZ), one yes > /dev/null running" >> "$OUT/load-busy.txt"
run_graft graft-now build/graft 8201 ar
run_graft graft-now build/graft 8202 graft
GOMP_SPINCOUNT=3000 "$PEERS/llama-server" -m "$M/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" -c 32768 -np 8 -t 2 -tb 2 \
  --port 8203 > /dev/null 2>&1 & pid=$!
wait_up 8203 && load llama-server 8203 none
kill -INT $pid; wait $pid
run_graft graft-before /tmp/old/build/graft 8204 ar
kill $yes_pid
echo "end $(date -u +%FT%TZ)" >> "$OUT/load-busy.txt"
