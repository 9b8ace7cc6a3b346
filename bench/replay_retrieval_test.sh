#!/bin/sh
# replay_retrieval refuses, with a message that says why and a non-zero exit, a
# results.json recorded without --save-outputs (its prompt_tokens are counts).
# Usage: replay_retrieval_test.sh REPLAY_BINARY SCRATCH_DIR
set -u
bin=$1 dir=$2
mkdir -p "$dir"
printf '{"rows":[{"config":"ar","category":"qa","prompt_id":"1","prompt_tokens":5,"turns":1}]}' > "$dir/nosave.json"
if "$bin" --profile "$dir/absent-profile.json" "$dir/nosave.json" 2> "$dir/err.txt"; then
  echo "replay_retrieval accepted a run without saved outputs"; exit 1
fi
grep -q "nosave.json: no saved outputs of ar" "$dir/err.txt" || { echo "unexpected error:"; cat "$dir/err.txt"; exit 1; }
