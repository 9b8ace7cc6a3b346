#!/bin/sh
# tie_margins on the tiny target: ar's own output, saved by `graft bench`, and a copy of
# its row under another config name that parts from it at token 5 (a token picked at
# random). The tool must replay ar's tokens, find that one divergence, read its margin
# from ar's logits, and exit 0 or 1 by --tie and by its default criterion. A run
# without saved outputs is refused with exit 2.
# Usage: tie_margins_test.sh TIE_MARGINS_BINARY GRAFT_BINARY SCRATCH_DIR
set -u
bin=$1 graft=$2 dir=$3
M=${GRAFT_MODEL_DIR:-$HOME/.cache/graft/models}
rm -rf "$dir" && mkdir -p "$dir"
export GRAFT_PROFILE_DIR="$dir/cache"
fail() { echo "FAIL: $*"; exit 1; }

printf '{"category":"qa","turns":["hello there, how are you"]}\n' > "$dir/one.jsonl"
"$graft" bench -m "$M/tiny-target.gguf" --no-draft --dataset "$dir/one.jsonl" --methods ar -n 12 --no-warmup \
  --save-outputs -o "$dir/run" > "$dir/bench.txt" 2>&1 || { cat "$dir/bench.txt"; fail "graft bench"; }

# diverge IN OUT [T]: IN's results plus a copy of ar's row renamed fake@16, its output
# cut after token 5, which becomes another (T: ar's row must have run at T, with a seed).
diverge() {
  python3 - "$@" <<'EOF' || fail "python"
import json, sys
d = json.load(open(sys.argv[1]))
ar = [r for r in d["rows"] if r["config"] == "ar"][0]
if len(sys.argv) > 3:
    assert ar["temperature"] == float(sys.argv[3]) and "seed" in ar, ar
other = json.loads(json.dumps(ar))
other["config"] = "fake@16"
out = other["output_tokens"][0]
assert len(out) > 6, out
out[5] = (out[5] + 1) % 1000
del out[6:]
d["rows"].append(other)
json.dump(d, open(sys.argv[2], "w"))
EOF
}
diverge "$dir/run/results.json" "$dir/diverged.json"

"$bin" --tie 1e9 "$dir/diverged.json" > "$dir/out.txt" 2>&1 || { cat "$dir/out.txt"; fail "a margin under 1e9 logits is not a near-tie"; }
grep -q "divergences 1, at a near-tie 1 (margin < 1e+09 logits)" "$dir/out.txt" || { cat "$dir/out.txt"; fail "summary"; }
grep -q "fake@16 .* 0     5 " "$dir/out.txt" || { cat "$dir/out.txt"; fail "the divergence is at turn 0, token 5"; }
grep -q "not reproduced" "$dir/out.txt" && { cat "$dir/out.txt"; fail "the replay did not reproduce ar's own tokens"; }
# ar's token is the argmax of the replayed logits: its margin over another token is >= 0,
# and > 0 here unless the two tie exactly.
margin=$(awk '$2 == "fake@16" {print $(NF-4)}' "$dir/out.txt")
awk -v m="$margin" 'BEGIN {exit !(m > 0)}' || { cat "$dir/out.txt"; fail "margin $margin is not positive"; }
"$bin" --tie 1e-9 "$dir/diverged.json" > "$dir/out2.txt" 2>&1
[ $? -eq 1 ] || { cat "$dir/out2.txt"; fail "a divergence at a margin of $margin logits passed --tie 1e-9"; }

# By default the margin is judged against twice the 16-row pass's largest logit
# difference, which is nowhere near the tiny model's lead of its best token over a
# random one: not a near-tie.
"$bin" "$dir/diverged.json" > "$dir/out4.txt" 2>&1
[ $? -eq 1 ] || { cat "$dir/out4.txt"; fail "a divergence at a margin of $margin logits passed as a near-tie"; }
grep -q "fake@16 .* NO$" "$dir/out4.txt" || { cat "$dir/out4.txt"; fail "the divergence is not flagged"; }

# No divergence: ar alone.
"$bin" "$dir/run/results.json" > "$dir/out3.txt" 2>&1 || { cat "$dir/out3.txt"; fail "no divergence must exit 0"; }
grep -q "divergences 0" "$dir/out3.txt" || { cat "$dir/out3.txt"; fail "counted a divergence in ar alone"; }

# A saved token outside the vocabulary (in ar's output, before the divergence): a clear error.
python3 - "$dir/diverged.json" "$dir/badtoken.json" <<'EOF2' || fail "python"
import json, sys
d = json.load(open(sys.argv[1]))
[r for r in d["rows"] if r["config"] == "ar"][0]["output_tokens"][0][2] = 10**9
[r for r in d["rows"] if r["config"] == "fake@16"][0]["output_tokens"][0][2] = 10**9
json.dump(d, open(sys.argv[2], "w"))
EOF2
"$bin" "$dir/badtoken.json" > /dev/null 2> "$dir/err.txt"
[ $? -eq 2 ] || { cat "$dir/err.txt"; fail "a token outside the vocabulary must exit 2"; }
grep -q "not in the target's vocabulary" "$dir/err.txt" || { cat "$dir/err.txt"; fail "unexpected error for a bad token"; }

# Sampled (T = 0.8, top-p 0.95): the replay draws ar's tokens again from the row's seed;
# a copy of ar's row parted at token 5 is a near-tie under --tie 1e9 and not under
# --tie 1e-9 (u lies inside ar's token's interval, at a margin > 0).
"$graft" bench -m "$M/tiny-target.gguf" --no-draft --dataset "$dir/one.jsonl" --methods ar -n 12 --no-warmup \
  --temps 0.8 --top-p 0.95 --save-outputs --no-plots -o "$dir/sampled" > "$dir/bench2.txt" 2>&1 ||
  { cat "$dir/bench2.txt"; fail "graft bench --temps 0.8"; }
diverge "$dir/sampled/results.json" "$dir/sampled_diverged.json" 0.8
"$bin" --tie 1e9 "$dir/sampled_diverged.json" > "$dir/out5.txt" 2>&1 || { cat "$dir/out5.txt"; fail "sampled: --tie 1e9"; }
grep -q "fake@16 .* 0     5 .* yes$" "$dir/out5.txt" || { cat "$dir/out5.txt"; fail "sampled: the divergence is at turn 0, token 5"; }
grep -q "T = 0.8: 0 of 1 rows identical to ar" "$dir/out5.txt" || { cat "$dir/out5.txt"; fail "sampled: counts"; }
grep -q "not reproduced" "$dir/out5.txt" && { cat "$dir/out5.txt"; fail "sampled: the replay did not draw ar's tokens"; }
"$bin" --tie 1e-9 "$dir/sampled_diverged.json" > "$dir/out6.txt" 2>&1
[ $? -eq 1 ] || { cat "$dir/out6.txt"; fail "sampled: a divergence inside ar's token's interval passed --tie 1e-9"; }

printf '{"rows":[{"config":"ar","category":"qa","prompt_id":"1","prompt_tokens":5,"turns":1}]}' > "$dir/nosave.json"
"$bin" "$dir/nosave.json" 2> "$dir/err.txt"
[ $? -eq 2 ] || fail "a run without saved outputs must exit 2"
grep -q "nosave.json: no saved outputs of ar" "$dir/err.txt" || { cat "$dir/err.txt"; fail "unexpected error"; }
"$bin" "$dir/absent.json" 2> "$dir/err.txt"
[ $? -eq 2 ] || fail "a missing file must exit 2"
grep -q "cannot read" "$dir/err.txt" || { cat "$dir/err.txt"; fail "unexpected error for a missing file"; }
echo "ok"
