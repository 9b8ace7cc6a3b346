#!/usr/bin/env bash
# Quick start, command 1: set up (idempotent), then generate with Graft on the
# default models and show it against plain decoding (ar) on the same prompt.
#   scripts/demo.sh ["your prompt"] [more graft generate flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
PROMPT=${1:-"Write a Python function that returns the n-th Fibonacci number iteratively, then explain its complexity."}
shift || true
# graft's policy prices trees by this machine's cost profile of the default models:
# measure it here, once (1.5 to 5 minutes on 2 cores), not inside the first request. With
# other flags (models, threads) generate measures its own on first use.
# Its last lines say what speculation can gain here at most (a proposer always right).
if [ $# -eq 0 ]; then build/graft tune --if-missing | sed -n '/^ceiling:/,$p'; fi
exec build/graft generate --compare --method graft -n 128 -p "$PROMPT" "$@"
