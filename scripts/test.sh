#!/usr/bin/env bash
# Quick start, command 2: set up (idempotent) and run the whole test suite.
#   GRAFT_TEST_REAL_PAIR=0 scripts/test.sh   skips the slow default-pair losslessness test
#   scripts/test.sh -L unit                  other arguments go to ctest
#   scripts/test.sh --asan [ctest args]      ASan + UBSan build in build-asan (Debug, -O1),
#                                            then the unit tests and cli_test under it
set -euo pipefail
cd "$(dirname "$0")/.."

asan=0
args=()
for a in "$@"; do
  if [ "$a" = --asan ]; then asan=1; else args+=("$a"); fi
done

if [ "$asan" = 0 ]; then
  scripts/setup.sh
  # Serial on purpose: llama.cpp's worker threads spin while they wait, so two model
  # processes (or a model beside a unit test) on 2 cores slow each other down badly.
  ctest --test-dir build --output-on-failure ${args[@]+"${args[@]}"}
  exit
fi

# Sanitizer run. Only graft's own code is instrumented (llama.cpp comes prebuilt
# from .venv). -O1 keeps the instrumented tests fast; Debug keeps assert() on.
# Model-heavy tests (default-pair engine tests, backend, bench harness, server
# end-to-end) are left out: too slow under instrumentation on 2 cores. cli_test and the
# tiny-model engine tests below run the CLI and the engine on the tiny models.
GRAFT_SKIP_BUILD=1 scripts/setup.sh
start=$SECONDS
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" \
  -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DGRAFT_SANITIZE=address,undefined -DGRAFT_WITH_LLAMA=ON \
  -DGRAFT_BUILD_TESTS=ON -DGRAFT_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j "$(nproc)" -- --quiet
echo "[test.sh --asan] build: $((SECONDS - start)) s"

# abort_on_error: a finding ends the process with SIGABRT, which cli_test.sh reports
# as a crash (exit >= 128) rather than as an expected error exit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}
rc=0
ctest --test-dir build-asan --output-on-failure -L unit ${args[@]+"${args[@]}"} || rc=1
ctest --test-dir build-asan --output-on-failure -R '^cli_test$' ${args[@]+"${args[@]}"} || rc=1
# The engine on the tiny models: the step, every proposer, the drafter's KV state and the
# cost profile cache (the default-pair tests are too slow instrumented).
ctest --test-dir build-asan --output-on-failure \
  -R '^(DrafterTest|CostProfileTest)\.|^EngineTest\.(GreedyLosslessTinyPair|ChainWithTheTargetAsDraft|GraftIsReproducibleTinyPair|BadOptions)' \
  ${args[@]+"${args[@]}"} || rc=1
echo "[test.sh --asan] build + tests: $((SECONDS - start)) s"
exit "$rc"
