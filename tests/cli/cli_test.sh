#!/usr/bin/env bash
# CLI behaviour on good and bad input: every bad input gives a clear message on
# stderr and a non-zero exit, never a crash (exit codes >= 128 = signal).
# Usage: cli_test.sh GRAFT_BINARY
set -u
GRAFT=${1:?usage: cli_test.sh GRAFT_BINARY}
M=${GRAFT_MODEL_DIR:-$HOME/.cache/graft/models}
TINY=$M/tiny-target.gguf
DRAFT=$M/tiny-draft.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Cost profiles and learned states go here, not into the user's cache.
export GRAFT_PROFILE_DIR="$TMP/cache"
pass=0 fail=0

# A check with an empty needle would pass on any output: refuse it (a test bug).
require_needle() {
  [ -n "$2" ] && return 0
  fail=$((fail + 1)); echo "FAIL $1 (test bug: empty needle matches anything)"
  return 1
}
# expect_fail NAME NEEDLE CMD...: non-zero exit below 128, stderr contains NEEDLE (non-empty).
expect_fail() {
  local name=$1 needle=$2; shift 2
  require_needle "$name" "$needle" || return 0
  "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  local rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qi -- "$needle" "$TMP/err"; then
    pass=$((pass + 1)); echo "ok   $name"
  else
    fail=$((fail + 1)); echo "FAIL $name (exit $rc)"; sed 's/^/     | /' "$TMP/err" | tail -5
  fi
}
# expect_ok NAME NEEDLE CMD...: exit 0, stdout contains NEEDLE (non-empty).
expect_ok() {
  local name=$1 needle=$2; shift 2
  require_needle "$name" "$needle" || return 0
  "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  local rc=$?
  if [ $rc -eq 0 ] && grep -q -- "$needle" "$TMP/out"; then
    pass=$((pass + 1)); echo "ok   $name"
  else
    fail=$((fail + 1)); echo "FAIL $name (exit $rc)"; tail -5 "$TMP/err" "$TMP/out" | sed 's/^/     | /'
  fi
}

printf 'not a model\n' >"$TMP/text.gguf"
head -c 1000000 "$TINY" >"$TMP/truncated.gguf"

expect_ok   "version names the llama.cpp commit" "commit" "$GRAFT" --version
expect_ok   "version names the CPU kernel set" "kernels" "$GRAFT" --version
expect_ok   "generate ar on the tiny model" "decoded 8 tokens" "$GRAFT" generate -m "$TINY" -p "hello" -n 8
expect_ok   "generate --json" '"new_tokens": 8' "$GRAFT" generate -m "$TINY" -md "$DRAFT" --method tree -p "hello" -n 8 --json
expect_ok   "generate -f FILE" "decoded 4 tokens" "$GRAFT" generate -m "$TINY" -f "$TMP/text.gguf" -n 4 --raw
expect_fail "-n 0" "-n must be at least 1" "$GRAFT" generate -m "$TINY" -p hi -n 0
expect_fail "unknown flag" "--frobnicate" "$GRAFT" generate -m "$TINY" -p hi --frobnicate
expect_fail "no subcommand" "subcommand" "$GRAFT"
expect_fail "missing model file" "not found" "$GRAFT" generate -m "$TMP/none.gguf" -p hi
expect_fail "non-GGUF model file" "not a GGUF" "$GRAFT" generate -m "$TMP/text.gguf" -p hi
expect_fail "truncated model file" "could not load" "$GRAFT" generate -m "$TMP/truncated.gguf" -p hi
expect_fail "draft vocabulary mismatch" "vocabular" "$GRAFT" generate -m "$TINY" -md "$M/tiny-draft-badvocab.gguf" -p hi
expect_fail "draft of another tokenizer" "vocabular" "$GRAFT" generate -m "$TINY" -md "$M/gemma-3-270m-q4_k_m.gguf" -p hi
expect_fail "prompt longer than the context" "context" "$GRAFT" generate -m "$TINY" -c 64 -n 4 --raw -p "$(printf 'word %.0s' $(seq 1 400))"
expect_fail "unknown method" "unknown method" "$GRAFT" generate -m "$TINY" -p hi --method medusa
expect_fail "graft without a draft model" "draft model" "$GRAFT" generate -m "$TINY" -p hi --method graft
expect_fail "rest without an index" "--index" "$GRAFT" generate -m "$TINY" -p hi --method rest
expect_fail "budget 0" "at least 1" "$GRAFT" generate -m "$TINY" -p hi --method suffix --tree-budget 0
expect_fail "budget above the sequence limit" "tree budget" "$GRAFT" generate -m "$TINY" -p hi --method suffix --tree-budget 1000
expect_fail "both -p and -f" "exactly one" "$GRAFT" generate -m "$TINY" -p hi -f "$TMP/text.gguf"
expect_fail "negative sure-bet cap" "--loss-sure-cap" "$GRAFT" generate -m "$TINY" -p hi --loss-sure-cap -1
expect_fail "NaN temperature" "temperature" "$GRAFT" generate -m "$TINY" -p hi -n 4 --temp nan
expect_fail "NaN top-p" "top-p" "$GRAFT" generate -m "$TINY" -p hi -n 4 --temp 0.8 --top-p nan
expect_fail "NaN prune p-min" "p-min" "$GRAFT" generate -m "$TINY" -p hi -n 4 --method suffix --prune-p-min nan
expect_fail "NaN skip-draft-gain" "skip-draft-gain" "$GRAFT" generate -m "$TINY" -md "$DRAFT" -p hi -n 4 --skip-draft-gain nan
expect_ok   "generate with sure bets off" "decoded 4 tokens" "$GRAFT" generate -m "$TINY" -p hi -n 4 --loss-sure-cap 0

# Index: build, stats, query, and refusal of bad files and other tokenizers.
printf 'def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n' >"$TMP/corpus.txt"
printf '{"text": "for i in range(10):\\n    print(i)"}\n{"text": "while True:\\n    pass"}\n' >"$TMP/corpus.jsonl"
expect_ok   "index build (text + JSONL)" "wrote" "$GRAFT" index build -m "$TINY" --input "$TMP/corpus.txt" -o "$TMP/a.idx"
expect_ok   "index build JSONL" "wrote" "$GRAFT" index build -m "$TINY" --input "$TMP/corpus.jsonl" --jsonl-field text -o "$TMP/b.idx"
expect_ok   "index stats" "checksums ok" "$GRAFT" index stats "$TMP/a.idx"
expect_ok   "index query" "candidates" "$GRAFT" index query "$TMP/a.idx" -m "$TINY" -p "def add(a, b):"
expect_ok   "generate with rest" "decoded 8 tokens" "$GRAFT" generate -m "$TINY" --index "$TMP/a.idx" --method rest -p "def add(a, b):" --raw -n 8
expect_fail "index of another tokenizer" "tokenizer" "$GRAFT" index query "$TMP/a.idx" -m "$M/gemma-3-270m-q4_k_m.gguf" -p "def"
expect_fail "index: missing field names file:line" "corpus.jsonl:1" "$GRAFT" index build -m "$TINY" --input "$TMP/corpus.jsonl" --jsonl-field nope -o "$TMP/c.idx"
printf '{"text": "ok"}\n{bad json\n' >"$TMP/bad.jsonl"
expect_fail "index: bad JSON line" "bad.jsonl:2" "$GRAFT" index build -m "$TINY" --input "$TMP/bad.jsonl" --jsonl-field text -o "$TMP/c.idx"
[ ! -e "$TMP/c.idx" ] && { pass=$((pass + 1)); echo "ok   failed build leaves no index"; } || { fail=$((fail + 1)); echo "FAIL failed build left $TMP/c.idx"; }
printf 'fine\n' >"$TMP/fine.txt"
printf 'text\n\xf7\xbf\xbf\xbf\n' >"$TMP/binary.txt"
expect_fail "index: text that is not UTF-8 names its file" "binary.txt: cannot tokenize the text: it is not valid UTF-8 (byte 5)" \
  "$GRAFT" index build -m "$TINY" --input "$TMP/fine.txt" --input "$TMP/binary.txt" -o "$TMP/c.idx"
[ ! -e "$TMP/c.idx" ] && { pass=$((pass + 1)); echo "ok   refused text leaves no index"; } || { fail=$((fail + 1)); echo "FAIL refused text left $TMP/c.idx"; }
# The chat template moves the file's bytes: the error names the file and byte 5 of it.
expect_fail "generate -f: text that is not UTF-8 names its file and byte" "binary.txt: cannot tokenize the text: it is not valid UTF-8 (byte 5)" \
  "$GRAFT" generate -m "$TINY" -f "$TMP/binary.txt" -n 1
expect_fail "index: not an index" "magic" "$GRAFT" index stats "$TINY"
head -c 200 "$TMP/a.idx" >"$TMP/trunc.idx"
expect_fail "index: truncated" "truncated" "$GRAFT" index stats "$TMP/trunc.idx"
cp "$TMP/a.idx" "$TMP/flip.idx"
size=$(stat -c %s "$TMP/flip.idx")
printf '\xff' | dd of="$TMP/flip.idx" bs=1 seek=$((size - 3)) conv=notrunc status=none
expect_fail "index: flipped byte" "checksum" "$GRAFT" index stats "$TMP/flip.idx"
expect_fail "index: missing" "cannot open index" "$GRAFT" index stats "$TMP/none.idx"

# tune --if-missing (the Quick start's set-up): measures into an empty cache, then
# finds what it cached and leaves it as it was.
TUNE=("$GRAFT" tune -m "$TINY" -md "$DRAFT" --profile-dir "$TMP/profiles" --max-rows 4 --max-draft-rows 2 --repeats 1 --if-missing)
if "${TUNE[@]}" >"$TMP/out" 2>"$TMP/err" </dev/null && grep -q "measured in" "$TMP/err" && grep -q "rows" "$TMP/out" \
   && [ "$(ls "$TMP/profiles" | wc -l)" -eq 1 ]; then
  pass=$((pass + 1)); echo "ok   tune --if-missing measures into an empty cache"
else
  fail=$((fail + 1)); echo "FAIL tune --if-missing into an empty cache"; tail -5 "$TMP/err" | sed 's/^/     | /'
fi
before=$(md5sum "$TMP"/profiles/* | cut -d' ' -f1)
if "${TUNE[@]}" >"$TMP/out" 2>"$TMP/err" </dev/null && grep -q "^cached" "$TMP/err" && ! grep -q "measured in" "$TMP/err" \
   && [ "$(md5sum "$TMP"/profiles/* | cut -d' ' -f1)" = "$before" ]; then
  pass=$((pass + 1)); echo "ok   tune --if-missing keeps a cached profile"
else
  fail=$((fail + 1)); echo "FAIL tune --if-missing with a cached profile"; tail -5 "$TMP/err" | sed 's/^/     | /'
fi

# The learned state: generate keeps one per model pair beside the profiles (or where
# --learned-state says), --no-learned-state keeps none, and an unusable file is a
# warning, then replaced: never a failed generation.
check() {  # check NAME CONDITION...: a pass when the command succeeds
  local name=$1; shift
  if "$@"; then pass=$((pass + 1)); echo "ok   $name"; else fail=$((fail + 1)); echo "FAIL $name"; fi
}
"$GRAFT" generate -m "$TINY" -md "$DRAFT" --method suffix -p "one two one two one two" -n 8 >/dev/null 2>&1 </dev/null
check "generate keeps a learned state beside the profiles" \
  grep -q '"calibration"' "$(ls "$TMP"/cache/learned-*.json 2>/dev/null | head -1)"
rm -rf "$TMP/cache"
"$GRAFT" generate -m "$TINY" -p hi -n 4 --no-learned-state >/dev/null 2>&1 </dev/null
check "--no-learned-state keeps none" [ -z "$(ls "$TMP"/cache/learned-*.json 2>/dev/null)" ]
mkdir -p "$TMP/ls" && printf 'not json' >"$TMP/ls/state.json"
"$GRAFT" generate -m "$TINY" -p hi -n 4 --learned-state "$TMP/ls/state.json" >"$TMP/out" 2>"$TMP/err" </dev/null
rc=$?
check "an unusable learned state is a warning, then replaced" \
  bash -c "[ $rc -eq 0 ] && grep -q 'not usable' '$TMP/err' && grep -q '\"key\"' '$TMP/ls/state.json'"
expect_fail "--learned-state with --no-learned-state" "excludes" \
  "$GRAFT" generate -m "$TINY" -p hi --learned-state "$TMP/ls/state.json" --no-learned-state

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
