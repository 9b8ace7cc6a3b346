#!/bin/bash
# old (3e3022d) vs new binary, alternating: ar decode t/s sampled (T 0.8, seed 1), no cut and top-p 0.95
P="Write a short poem about autumn leaves and the passing of time."
for rep in 1 2 3; do
  for bin in old new; do
    B=$([ $bin = old ] && echo /tmp/x/build/graft || echo /work/main/build/graft)
    for cfg in "T0.8|--temp 0.8 -s 1" "T0.8-top-p-0.95|--temp 0.8 --top-p 0.95 -s 1"; do
      name=${cfg%%|*}; args=${cfg#*|}
      echo "$rep $bin $name $($B generate --method ar $args -n 96 --json -p "$P" 2>/dev/null | python3 -c "import json,sys; s=json.load(sys.stdin)['stats']; print(round(s['decode_tokens_per_s'],2), s['new_tokens'])")"
    done
  done
done
