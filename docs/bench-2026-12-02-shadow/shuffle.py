#!/usr/bin/env python3
"""Writes the shuffled replay sets of this folder's README into OUT (default /tmp/shadow-sets):
spec60-s1..s3 and ab25-s1..s2 (a trace's rows in random.Random(seed) order), mix-s1..s2
(spec60 + code16 + long4, shuffled together, n_predict 128 for all)."""
import json, random, sys, os
T = os.path.join(os.path.dirname(__file__), "../bench-2026-12-02-request-trust/traces")
out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/shadow-sets"
os.makedirs(out, exist_ok=True)
for s in ["spec60", "ab25"]:
    d = json.load(open(os.path.join(T, s + ".json")))
    for seed in [1, 2, 3]:
        e = dict(d); rows = list(d["rows"]); random.Random(seed).shuffle(rows); e["rows"] = rows
        json.dump(e, open(os.path.join(out, "%s-s%d.json" % (s, seed)), "w"))
d1, d2, d3 = (json.load(open(os.path.join(T, s + ".json"))) for s in ["spec60", "code16", "long4"])
rows = d1["rows"] + d2["rows"] + d3["rows"]
for seed in [1, 2]:
    random.Random(seed).shuffle(rows); e = dict(d1); e["rows"] = list(rows)
    e["flags"] = dict(d1["flags"]); e["flags"]["n_predict"] = 128
    json.dump(e, open(os.path.join(out, "mix-s%d.json" % seed), "w"))
