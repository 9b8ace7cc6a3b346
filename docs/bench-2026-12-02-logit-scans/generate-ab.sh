#!/bin/bash
# old (3e3022d) vs new binary, alternating; decode t/s of ar greedy, ar sampled top-p, graft --tree-budget 1
P="Write a short poem about autumn leaves and the passing of time."
for rep in 1 2 3; do
  for bin in old new; do
    B=$([ $bin = old ] && echo /tmp/x/build/graft || echo /work/main/build/graft)
    for cfg in "ar|--method ar" "ar-top-p|--method ar --temp 0.8 --top-p 0.95 -s 1" "graft-b1|--method graft --tree-budget 1 --no-learned-state"; do
      name=${cfg%%|*}; args=${cfg#*|}
      tps=$($B generate $args -n 96 --json -p "$P" 2>/dev/null | python3 -c "import json,sys; j=json.load(sys.stdin); s=j['stats']; print(round(s['decode_tokens_per_s'],2), round(s['ms']['commit'],1), s['new_tokens'])" 2>/dev/null || echo ERR)
      echo "$rep $bin $name $tps"
    done
  done
done
