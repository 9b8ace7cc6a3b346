#!/usr/bin/env python3
"""Summarises replay_retrieval's per-prompt lines on stdin: the geometric mean over
every prompt, the slowest prompt, how many ran below 0.95x, and the geometric mean
per category (used by replay.sh here and in ../bench-2026-12-03-context-cost)."""
import collections
import math
import sys

c = collections.defaultdict(list)
v = []
for line in sys.stdin:
    w = line.split()
    if len(w) == 5 and '/' in w[0]:
        x = float(w[4].rstrip('x'))
        c[w[0].split('/')[0]].append(x)
        v.append(x)
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
print('all %.3f  min %.2f  below 0.95: %2d  |' % (g(v), min(v), sum(x < .95 for x in v)),
      ' '.join('%s %.2f' % (k[:5], g(x)) for k, x in sorted(c.items())))
