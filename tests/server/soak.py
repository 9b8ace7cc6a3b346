#!/usr/bin/env python3
"""Soak run for a running `graft serve` (a script, not part of the test command):
C concurrent streaming chat clients send requests back to back for --minutes, each
on the Spec-Bench prompts in turn. Reports errors, time to first token (p50/p99),
tokens/s per request and in total, and the server's resident memory (RSS, from
/proc/PID/status) after the warm-up against the end. Exits 1 on any error or when RSS
grew by more than --max-rss-growth after the warm-up.

  graft serve --parallel 8 --port 8080 & pid=$!
  .venv/bin/python tests/server/soak.py --url http://127.0.0.1:8080 --pid $pid --clients 8 --minutes 10
"""
import argparse
import statistics
import sys
import threading
import time

from load import one, spec_bench_prompts


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--pid", type=int, required=True, help="the server's process id (for its RSS)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--warmup-minutes", type=float, default=1)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--method", default="graft")
    ap.add_argument("--max-rss-growth", type=float, default=0.05, help="allowed RSS growth after the warm-up")
    args = ap.parse_args()
    prompts = spec_bench_prompts(1000)  # all of them
    t_start = time.time()
    t_warm = t_start + 60 * args.warmup_minutes
    t_end = t_start + 60 * args.minutes
    lock = threading.Lock()
    results, errors, rss = [], [], []  # results: (t_done, ttft, tok/s, tokens)

    def client(c):
        i = c
        while time.time() < t_end:
            try:
                ttft, tps, tokens = one(args.url, prompts[i % len(prompts)], args.method, args.max_tokens)
                with lock:
                    results.append((time.time(), ttft, tps, tokens))
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                with lock:
                    errors.append(f"client {c}: {type(e).__name__}: {e}")
            i += args.clients

    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        rss.append((time.time(), rss_kib(args.pid)))
        time.sleep(5)
    for t in threads:
        t.join()
    rss.append((time.time(), rss_kib(args.pid)))

    after = [r for r in results if r[0] >= t_warm]
    warm_rss = [k for t, k in rss if t >= t_warm]
    rss_warm, rss_end, rss_max = warm_rss[0], warm_rss[-1], max(warm_rss)
    wall = time.time() - t_warm
    growth = (rss_end - rss_warm) / rss_warm
    print(f"{args.clients} clients, {args.minutes:g} min ({args.warmup_minutes:g} warm-up), method {args.method}, "
          f"{args.max_tokens} tokens per request")
    print(f"requests {len(results)} ({len(after)} after warm-up), errors {len(errors)}")
    print(f"time to first token: p50 {quantile([r[1] for r in after], 0.5):.2f} s, "
          f"p99 {quantile([r[1] for r in after], 0.99):.2f} s")
    print(f"tokens/s per request: median {statistics.median(r[2] for r in after):.2f}; "
          f"total after warm-up {sum(r[3] for r in after) / wall:.1f} tokens/s")
    print(f"RSS after warm-up {rss_warm / 1024:.1f} MiB, at the end {rss_end / 1024:.1f} MiB "
          f"(max {rss_max / 1024:.1f}), growth {100 * growth:+.2f}%")
    for e in errors[:10]:
        print("error:", e)
    ok = not errors and growth <= args.max_rss_growth
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
