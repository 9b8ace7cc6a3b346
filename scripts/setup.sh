#!/usr/bin/env bash
# One-time (idempotent) set-up: system packages, the pinned llama.cpp backend in
# .venv (with graft's multi-row kernels, ggml-patch/), the models, and the build. A second run is quick: every step checks
# first and skips what is already done.
#   scripts/setup.sh            everything
#   GRAFT_SKIP_BUILD=1 ...      all but the CMake build
#   scripts/setup.sh --peers    only llama.cpp's own tools for `graft bench --peers`, built
#                               from the same pinned source (opt-in; ~15 min the first time)
set -euo pipefail
PEERS_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --peers) PEERS_ONLY=1 ;;
    *) echo "setup: unknown argument '$arg' (use --peers or nothing)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
ROOT=$PWD
LLAMA_CPP_PYTHON_VERSION=0.3.36
GGUF_VERSION=0.19.0
OPENAI_VERSION=3.51.0
MATPLOTLIB_VERSION=3.11.2
# What the build and tests use; libcpp-httplib-dev pulls in the OpenSSL, zlib and brotli
# headers its pkg-config file requires. curl: tests/server/server_test.py.
APT_PACKAGES=(build-essential cmake ninja-build pkg-config python3-venv libgtest-dev
  libbenchmark-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev libdivsufsort-dev libxxhash-dev
  curl patch)
log() { printf '[setup] %s\n' "$*"; }
# llama.cpp for this CPU (-march=native), but never its AMX kernels: the pinned build's
# AMX path dies with SIGILL on Sapphire Rapids machines of this kind (its tile config is
# optimised away, llama.cpp PR #26954), in llama-cpp-python itself as well. Explicit
# -mno-amx-* win over -march=native in GCC whatever their order.
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
BACKEND_CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DCMAKE_C_FLAGS='$NO_AMX' -DCMAKE_CXX_FLAGS='$NO_AMX'"

# 1. System packages (Debian 12).
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing system packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The llama-cpp-python source distribution (it vendors llama.cpp at the pinned commit),
# downloaded once into the cache; prints its path.
fetch_sdist() {
  local dir=${GRAFT_SDIST_CACHE:-$HOME/.cache/graft/src}
  local sdist="$dir/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
  if [ ! -f "$sdist" ]; then
    log "downloading the llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION source distribution" >&2
    local py=python3
    [ -x .venv/bin/python ] && py=.venv/bin/python
    mkdir -p "$dir"
    rm -rf "$dir/src.tmp"
    "$py" -m pip download -q --no-binary :all: --no-deps "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$dir/src.tmp" >&2
    mv "$dir/src.tmp/$(basename "$sdist")" "$sdist"
    rm -rf "$dir/src.tmp"
  fi
  echo "$sdist"
}

# Peers: llama.cpp's tools (llama-completion, llama-speculative-simple, llama-lookup,
# llama-server) from the llama-cpp-python sdist's vendor/llama.cpp, i.e. the commit our
# backend is built from, with -march=native like it. Statically linked, into a cache
# folder outside the repo; nothing of that source enters the repo.
PEER_TARGETS=(llama-completion llama-speculative-simple llama-lookup llama-server)
build_peers() {
  local cache=${GRAFT_PEERS_CACHE:-$HOME/.cache/graft/peers/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION}
  local bin=${GRAFT_PEERS_DIR:-$cache/bin}
  local have=1
  for t in "${PEER_TARGETS[@]}"; do [ -x "$bin/$t" ] || have=0; done
  [ "$(cat "$bin/graft-peers.stamp" 2>/dev/null)" = "$NO_AMX" ] || have=0
  if [ "$have" = 1 ]; then log "llama.cpp peers present in $bin"; return; fi
  mkdir -p "$cache/src" "$bin"
  local sdist
  sdist=$(fetch_sdist)
  local llama="$cache/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
  if [ ! -f "$llama/CMakeLists.txt" ]; then
    tar -xzf "$sdist" -C "$cache/src" "llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
  fi
  log "building llama.cpp's ${PEER_TARGETS[*]} (once; ~15 min on 2 cores)"
  cmake -S "$llama" -B "$cache/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX" >"$cache/build.log" 2>&1 ||
    { tail -40 "$cache/build.log" >&2; exit 1; }
  # Its compiler warnings are not ours to read: the log keeps them.
  cmake --build "$cache/build" -j "$(nproc)" --target "${PEER_TARGETS[@]}" >>"$cache/build.log" 2>&1 ||
    { tail -40 "$cache/build.log" >&2; echo "setup: building llama.cpp's tools failed (log: $cache/build.log)" >&2; exit 1; }
  for t in "${PEER_TARGETS[@]}"; do  # atomically: a bench never sees half a binary
    cp "$cache/build/bin/$t" "$bin/.$t.tmp"
    mv "$bin/.$t.tmp" "$bin/$t"
  done
  echo "$NO_AMX" > "$bin/graft-peers.stamp"
  log "llama.cpp peers built into $bin"
}
if [ "$PEERS_ONLY" = 1 ]; then
  build_peers
  exit 0
fi

# 2. Python virtual environment with the pinned llama.cpp, compiled from its source
#    distribution for this CPU with graft's multi-row kernels added (ggml-patch/: a
#    patch to ggml-cpu and the files it adds). The stamp names the patch and the CPU, so
#    a changed patch or another machine rebuilds it.
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
installed() { "$VPY" -m pip show "$1" 2>/dev/null | awk '/^Version:/{print $2}'; }
# The stamp records what the installed backend was built with; a different one rebuilds
# it (without pip's wheel cache, which ignores CMAKE_ARGS).
BACKEND_STAMP=.venv/graft-backend.stamp
PATCH_SUM=$(cd ggml-patch && find . -type f ! -name '*.md' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
CPU_SUM=$( (grep -E '^(model name|flags)' /proc/cpuinfo 2>/dev/null || uname -m) | sort -u | sha256sum | cut -c1-16)
BACKEND_WANT="llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION $BACKEND_CMAKE_ARGS ggml-patch=$PATCH_SUM cpu=$CPU_SUM"
if [ "$(installed llama_cpp_python)" != "$LLAMA_CPP_PYTHON_VERSION" ] ||
   [ "$(cat "$BACKEND_STAMP" 2>/dev/null)" != "$BACKEND_WANT" ]; then
  log "building llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION with ggml-patch/ (builds llama.cpp; ~10 min)"
  rm -f "$BACKEND_STAMP"
  SDIST=$(fetch_sdist)
  SRC=.venv/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION
  rm -rf .venv/src && mkdir -p .venv/src
  tar -xzf "$SDIST" -C .venv/src
  ggml-patch/apply.sh "$SRC/vendor/llama.cpp"
  CMAKE_ARGS="$BACKEND_CMAKE_ARGS" "$VPY" -m pip install -q --force-reinstall --no-deps --no-cache-dir "./$SRC"
  "$VPY" -m pip install -q "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"  # its Python dependencies
  rm -rf .venv/src
  echo "$BACKEND_WANT" > "$BACKEND_STAMP"
fi
[ "$(installed gguf)" = "$GGUF_VERSION" ] || "$VPY" -m pip install -q "gguf==$GGUF_VERSION"
[ "$(installed openai)" = "$OPENAI_VERSION" ] || "$VPY" -m pip install -q "openai==$OPENAI_VERSION"
[ "$(installed matplotlib)" = "$MATPLOTLIB_VERSION" ] || "$VPY" -m pip install -q "matplotlib==$MATPLOTLIB_VERSION"
SITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for f in include/llama.h lib/libllama.so lib/cmake/llama/llama-config.cmake; do
  [ -e "$SITE/$f" ] || { echo "setup: $SITE/$f missing from the llama-cpp-python install" >&2; exit 1; }
done

# 3. Models (downloaded from PyPI packages into ~/.cache/graft/models, verified).
"$VPY" scripts/models.py
MODELS=${GRAFT_MODEL_DIR:-$HOME/.cache/graft/models}
TINY_VERSION=$(sed -n 's/^VERSION = \([0-9]*\).*/\1/p' scripts/make_tiny_models.py)
if [ "$(cat "$MODELS/tiny.version" 2>/dev/null)" != "$TINY_VERSION" ]; then
  log "generating tiny random-weight test models"
  "$VPY" scripts/make_tiny_models.py "$MODELS/smollm2-135m-instruct-q4_1.gguf" "$MODELS"
fi

# 4. Build.
if [ "${GRAFT_SKIP_BUILD:-0}" != 1 ]; then
  if [ ! -f build/build.ninja ]; then
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  cmake --build build -j "$(nproc)" -- --quiet
fi
