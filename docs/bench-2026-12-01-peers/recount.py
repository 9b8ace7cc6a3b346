# Recounts llama-ar / llama-lookup rows of a results.json made before the peers' token
# accounting fix (lookup: its prefill makes the first token, one pass fewer per turn;
# llama-completion: the last decode of an eog turn yields the end token). Prints the
# corrected category table cells and e2e.
import json, sys, statistics as st
j = json.load(open(sys.argv[1]))
rows = j['rows']; cats = j['categories']
ar = {(r['prompt_id']): r for r in rows if r['config'] == 'ar'}
def dec_ms(r): return r['new_tokens'] / r['tokens_per_s'] * 1000
out = {}
for r in rows:
    c = r['config']
    if c not in ('llama-ar', 'llama-lookup') or r.get('error'): continue
    a = ar[r['prompt_id']]
    n, p = r['new_tokens'], r['target_passes']
    if c == 'llama-lookup':
        n -= r['turns']; p -= r['turns']
    elif r['stop_reason'] == 'eog':
        n -= 1   # only the last turn's stop is recorded; earlier turns ran to -n here
    d = dec_ms(r)
    sp = (n / d) / a['tokens_per_s'] * 1000
    a_dec = dec_ms(a)
    ar_ms = (a['wall_ms'] - a_dec) + n * a_dec / a['new_tokens']
    e2e = ar_ms / r['wall_ms']
    out.setdefault(c, []).append((r['category'], sp, e2e, n, p))
for c, v in out.items():
    cells = []
    for cat in cats + ['overall']:
        sel = [x for x in v if cat == 'overall' or x[0] == cat]
        tau = sum(x[3] for x in sel) / sum(x[4] for x in sel)
        cells.append('%.2fx (%.2f) e2e %.2f' % (st.mean(x[1] for x in sel), tau, st.mean(x[2] for x in sel)))
    print(c); [print('  ', cat, cell) for cat, cell in zip(cats + ['overall'], cells)]
