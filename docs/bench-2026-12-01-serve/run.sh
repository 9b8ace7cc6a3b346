#!/usr/bin/env bash
# graft-before: `git worktree add /tmp/old e18607d` built with cmake -DCMAKE_BUILD_TYPE=Release (target graft_cli).
# graft-now rows: re-run after commit "a prompt's last chunk and its first tree share a pass" with the first
# two run_graft lines only; graft-now-fifo rows are this script's first run, before that commit.
# One server at a time on a quiet machine, a fresh server per method (graft learns from
# every output): graft now (EngineGroup), graft before (e18607d: an engine and a thread
# per slot), llama.cpp's llama-server; 1/2/4/8 clients, 128 tokens, Spec-Bench prompts.
set -u
cd /work/main
OUT=docs/bench-2026-12-01-serve
M=~/.cache/graft/models
PEERS=~/.cache/graft/peers/llama-cpp-python-0.3.36/bin
CLIENTS=${CLIENTS:-1 2 4 8}
wait_up() { for i in $(seq 1 300); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 1; done; return 1; }
load() {  # label port method
  .venv/bin/python tests/server/load.py --url "http://127.0.0.1:$2" --methods "$3" --clients $CLIENTS \
    --max-tokens 128 --label "$1" --json "$OUT/load.jsonl" 2>&1 | tee -a "$OUT/load.txt"
}
run_graft() {  # label binary port method
  "$2" serve --parallel 8 --port "$3" > "$OUT/$1-$4.server.log" 2>&1 & pid=$!
  wait_up "$3" && load "$1" "$3" "$4"
  kill -INT $pid; wait $pid
}
echo "start $(date -u +%FT%TZ) $(lscpu | grep 'Model name' | sed 's/  */ /g')" >> "$OUT/load.txt"
run_graft graft-now build/graft 8101 ar
run_graft graft-now build/graft 8102 graft
GOMP_SPINCOUNT=3000 "$PEERS/llama-server" -m "$M/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" -c 32768 -np 8 -t 2 -tb 2 \
  --port 8103 > "$OUT/llama-server.log" 2>&1 & pid=$!
wait_up 8103 && load llama-server 8103 none
kill -INT $pid; wait $pid
run_graft graft-before /tmp/old/build/graft 8104 ar
run_graft graft-before /tmp/old/build/graft 8105 graft
echo "end $(date -u +%FT%TZ)" >> "$OUT/load.txt"
