#!/usr/bin/env bash
# Quick start, command 1: set up (idempotent), then generate with Graft on the
# default models and show it against plain decoding (ar) on the same prompt.
#   scripts/demo.sh ["your prompt"] [more graft generate flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
PROMPT=${1:-"Write a Python function that returns the n-th Fibonacci number iteratively, then explain its complexity."}
shift || true
exec build/graft generate --compare --method graft -n 128 -p "$PROMPT" "$@"
