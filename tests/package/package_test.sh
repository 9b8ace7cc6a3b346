#!/usr/bin/env bash
# Consumer test of the installed package (ctest: package_test): installs the graft
# build into a temporary prefix, configures and builds tests/package against it with
# find_package(graft CONFIG), and runs the result on the tiny target model.
# Usage: package_test.sh CMAKE BUILD_DIR CONSUMER_SOURCE_DIR LLAMA_PREFIX CXX
set -euo pipefail
CMAKE=${1:?usage: package_test.sh CMAKE BUILD_DIR CONSUMER_SOURCE_DIR LLAMA_PREFIX CXX}
BUILD=$2 SRC=$3 LLAMA_PREFIX=$4 CXX=$5
MODEL=${GRAFT_MODEL_DIR:-$HOME/.cache/graft/models}/tiny-target.gguf
[ -f "$MODEL" ] || { echo "missing $MODEL: run scripts/setup.sh" >&2; exit 1; }

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$CMAKE" --install "$BUILD" --prefix "$TMP/prefix" >"$TMP/install.log" || { cat "$TMP/install.log"; exit 1; }
test -f "$TMP/prefix/include/graft/engine.h"
test -x "$TMP/prefix/bin/graft"
# Internal headers stay out of the install.
if find "$TMP/prefix/include" -name 'sequence_ops.h' | grep -q .; then echo "internal header installed" >&2; exit 1; fi

"$CMAKE" -S "$SRC" -B "$TMP/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_PREFIX_PATH="$TMP/prefix;$LLAMA_PREFIX"
"$CMAKE" --build "$TMP/build" -j2
"$TMP/build/graft_consumer" "$MODEL"
# The installed CLI runs too (its RPATH still finds libllama.so).
"$TMP/prefix/bin/graft" --version
