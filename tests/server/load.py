#!/usr/bin/env python3
"""Load probe for a running `graft serve` (not a test): C concurrent streaming chat
clients per round, each asking for --max-tokens greedy tokens; prints, per method
and concurrency, the median time to first token and the median tokens/s per client
(completion tokens / whole request time, queueing included).

  graft serve -m MODEL -md DRAFT --port 8080 &
  .venv/bin/python tests/server/load.py --url http://127.0.0.1:8080 --methods ar graft --clients 1 4 8
"""
import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import openai

PROMPTS = [
    "Write a short poem about the sea.",
    "Explain what a hash table is in two sentences.",
    "List three uses of Python decorators.",
    "What is the capital of France, and why is it famous?",
    "Describe how a bicycle works.",
    "Give a recipe for pancakes.",
    "Summarise the plot of Romeo and Juliet.",
    "Why is the sky blue?",
]


def one(url, prompt, method, max_tokens):
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600)
    t0 = time.perf_counter()
    ttft, tokens = None, 0
    stream = client.chat.completions.create(model="graft", messages=[{"role": "user", "content": prompt}],
                                            max_tokens=max_tokens, temperature=0, stream=True,
                                            extra_body={"graft": {"method": method}})
    for chunk in stream:
        if ttft is None and chunk.choices and chunk.choices[0].delta.content:
            ttft = time.perf_counter() - t0
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    total = time.perf_counter() - t0
    return ttft or total, tokens / total, tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--methods", nargs="+", default=["ar", "graft"])
    ap.add_argument("--clients", nargs="+", type=int, default=[1, 4, 8])
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    one(args.url, PROMPTS[0], "ar", 4)  # warm-up
    print(f"{'method':8} {'clients':>7} {'median TTFT s':>14} {'median tok/s/client':>20} {'aggregate tok/s':>16}")
    for method in args.methods:
        for c in args.clients:
            t0 = time.perf_counter()
            with ThreadPoolExecutor(c) as ex:
                res = list(ex.map(lambda i: one(args.url, PROMPTS[i % len(PROMPTS)], method, args.max_tokens),
                                  range(c)))
            wall = time.perf_counter() - t0
            ttft = statistics.median(r[0] for r in res)
            tps = statistics.median(r[1] for r in res)
            agg = sum(r[2] for r in res) / wall
            print(f"{method:8} {c:7d} {ttft:14.2f} {tps:20.1f} {agg:16.1f}", flush=True)


if __name__ == "__main__":
    main()
