#!/usr/bin/env bash
# Quick start, command 1: set up (idempotent), then run Graft and plain decoding (ar)
# on the default models, on two prompts shipped in scripts/demo/: a code edit (the
# answer copies much of its prompt: where graft gains) and an open chat question
# (nothing to copy: where, on a CPU, it should not lose). For each it prints graft's
# speedup over ar, tokens per target pass (tau) and whether the text is ar's, then
# what speculation can gain on this machine at most and what to expect.
#   scripts/demo.sh                       the two shipped prompts
#   scripts/demo.sh "your prompt" [flags] one prompt of yours (flags go to graft generate)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# graft's policy prices trees by this machine's cost profile of the default models:
# measure it here, once (1.5 to 5 minutes on 2 cores), not inside the first request.
# Its last lines say what speculation can gain here at most (a proposer always right).
if [ $# -gt 0 ]; then
  PROMPT=$1
  shift
  [ $# -eq 0 ] && build/graft tune --if-missing | sed -n '/^ceiling:/,$p'
  exec build/graft generate --compare --method graft -n 128 -p "$PROMPT" "$@"
fi
ceiling=$(build/graft tune --if-missing | sed -n '/^ceiling:/,$p')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # run NAME FILE TOKENS: graft then ar on one prompt, one summary line
  echo
  echo "== $1 (scripts/demo/$2): $(head -n 1 "scripts/demo/$2")"
  build/graft generate --compare --method graft -n "$3" -f "scripts/demo/$2" --json >"$tmp/$2.json"
  python3 - "$1" "$tmp/$2.json" <<'EOF' | tee -a "$tmp/summary"
import json, sys
name, path = sys.argv[1], sys.argv[2]
j = json.load(open(path))
lines = j["text"].strip().splitlines()
for l in lines[:12]:
    print("   | " + l)
if len(lines) > 12:
    print("   | ... (%d more lines)" % (len(lines) - 12))
g, a = j["stats"], j["ar"]
print("%s: graft %.2fx over ar (%.1f vs %.1f tokens/s), %.2f tokens per target pass, output %s ar's"
      % (name, j["speedup"], g["decode_tokens_per_s"], a["decode_tokens_per_s"], g["tau"],
         "identical to" if j["identical_to_ar"] else "differs from"))
EOF
}
run "code edit" code_edit.txt 128
run "chat" chat.txt 96

echo
echo "== this machine: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores," \
  "$(build/graft --version | sed -n 's/.*, graft //p' | sed 's/ from .*//')"
cat "$tmp/summary" | grep -E '^(code edit|chat):'
echo "$ceiling"
python3 - "$tmp/code_edit.txt.json" "$tmp/chat.txt.json" <<'EOF'
import json, sys
edit, chat = (json.load(open(p))["speedup"] for p in sys.argv[1:])
print("what to expect here: about %.1fx where the answer copies its prompt (code edits, "
      "summaries, rewrites), and about %.1fx where it does not (open chat, math): graft "
      "bets only where its cost profile says a bet pays. Figures for whole sets: docs/results.md."
      % (edit, chat))
EOF
