#!/usr/bin/env python3
"""Load probe for a running OpenAI-compatible server (not a test): C concurrent
streaming chat clients per round, each asking for --max-tokens greedy tokens on its
own Spec-Bench prompt (tests/data, one category after another; every round gets
prompts no earlier round had, so graft's history of past outputs cannot answer from
an earlier round, and each method gets the same ones: give each method a fresh server,
as graft learns from every output, ar's included); prints, per method
and concurrency, the median time to first token, the median tokens/s per client
(completion tokens / whole request time, queueing included) and the total tokens/s
of the round (all completion tokens / the round's wall time).

  graft serve --parallel 8 --port 8080 &
  .venv/bin/python tests/server/load.py --url http://127.0.0.1:8080 --methods ar graft --clients 1 2 4 8

--methods none sends no graft options (any server, e.g. llama.cpp's llama-server);
--label names the rows; --json FILE appends them to a JSON-lines file.
"""
import argparse
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import openai

HERE = os.path.dirname(os.path.abspath(__file__))


def spec_bench_prompts(n):
    """Up to n first turns, round-robin over the categories, so concurrent clients differ."""
    by_cat = {}
    with open(os.path.join(HERE, "..", "data", "spec_bench", "question.jsonl")) as f:
        for line in f:
            q = json.loads(line)
            cat = "mt_bench" if q["question_id"] <= 160 else q["category"]
            by_cat.setdefault(cat, []).append(q["turns"][0][:1500])
    out, i = [], 0
    while len(out) < n and any(i < len(v) for v in by_cat.values()):
        for cat in sorted(by_cat):
            if i < len(by_cat[cat]) and len(out) < n:
                out.append(by_cat[cat][i])
        i += 1
    return out


def one(url, prompt, method, max_tokens):
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=1200)
    extra = {} if method == "none" else {"graft": {"method": method}}
    t0 = time.perf_counter()
    ttft, tokens, chunks = None, None, 0
    stream = client.chat.completions.create(model="graft", messages=[{"role": "user", "content": prompt}],
                                            max_tokens=max_tokens, temperature=0, stream=True,
                                            stream_options={"include_usage": True}, extra_body=extra)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            chunks += 1
            if ttft is None:
                ttft = time.perf_counter() - t0
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    total = time.perf_counter() - t0
    tokens = chunks if tokens is None else tokens
    return ttft or total, tokens / total, tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--methods", nargs="+", default=["ar", "graft"])
    ap.add_argument("--clients", nargs="+", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--label", default="", help="row label (default: the method)")
    ap.add_argument("--json", default="", help="append the rows to this JSON-lines file")
    args = ap.parse_args()
    prompts = spec_bench_prompts(1 + sum(args.clients))
    if len(prompts) < 1 + sum(args.clients):
        raise SystemExit(f"the Spec-Bench fixture has {len(prompts)} prompts; these rounds need {1 + sum(args.clients)}")
    one(args.url, prompts.pop(), args.methods[0], 4)  # warm-up
    rounds, at = [], 0
    for c in args.clients:
        rounds.append(prompts[at:at + c])
        at += c
    print(f"{'label':16} {'clients':>7} {'median TTFT s':>14} {'median tok/s/client':>20} {'total tok/s':>12}")
    for method in args.methods:
        label = args.label or method
        for c, mine in zip(args.clients, rounds):
            t0 = time.perf_counter()
            with ThreadPoolExecutor(c) as ex:
                res = list(ex.map(lambda p: one(args.url, p, method, args.max_tokens), mine))
            wall = time.perf_counter() - t0
            row = {"label": label, "method": method, "clients": c, "max_tokens": args.max_tokens,
                   "median_ttft_s": statistics.median(r[0] for r in res),
                   "median_client_tps": statistics.median(r[1] for r in res),
                   "total_tps": sum(r[2] for r in res) / wall, "tokens": sum(r[2] for r in res), "wall_s": wall}
            print(f"{label:16} {c:7d} {row['median_ttft_s']:14.2f} {row['median_client_tps']:20.1f} "
                  f"{row['total_tps']:12.1f}", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
