#!/usr/bin/env bash
# Adds graft's multi-row kernels to a llama.cpp source tree (the pinned commit, as the
# llama-cpp-python==0.3.36 source distribution vendors it): copies the files ours alone
# (ggml-cpu/...) and applies multirow.patch, the hunks that call them (README.md).
#   ggml-patch/apply.sh path/to/llama.cpp
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dst=${1:?usage: apply.sh LLAMA_CPP_DIR}
[ -f "$dst/ggml/src/ggml-cpu/ggml-cpu.c" ] || { echo "apply.sh: $dst is not a llama.cpp tree" >&2; exit 1; }
(cd "$here" && find ggml-cpu -type f) | while read -r f; do
  cp "$here/$f" "$dst/ggml/src/$f"
done
patch -p1 --forward --quiet -d "$dst" < "$here/multirow.patch"
