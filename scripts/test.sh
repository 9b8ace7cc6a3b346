#!/usr/bin/env bash
# Quick start, command 2: set up (idempotent) and run the whole test suite.
#   GRAFT_TEST_REAL_PAIR=0 scripts/test.sh   skips the slow default-pair losslessness test
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Serial on purpose: llama.cpp's worker threads spin while they wait, so two model
# processes (or a model beside a unit test) on 2 cores slow each other down badly.
ctest --test-dir build --output-on-failure "$@"
