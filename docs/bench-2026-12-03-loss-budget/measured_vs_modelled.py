# Measured against modelled decode time per prompt of `graft bench` results: how far the
# cost profile prices the passes each method actually ran. Run from the repository root:
#   python3 docs/bench-2026-12-03-loss-budget/measured_vs_modelled.py PROFILE.json /tmp/lb/budget1/results.json ...
import json, sys
prof = json.load(open(sys.argv[1]))['verify_ms']
for path in sys.argv[2:]:
    j = json.load(open(path))
    rows = j['rows']
    by = {}
    for r in rows: by.setdefault(r['prompt_id'], {})[r['config']] = r
    tot = {'ar_meas':0,'ar_mod':0,'g_meas':0,'g_mod':0}
    out=[]
    for pid, d in by.items():
        a, g = d.get('ar'), d.get('graft@16')
        if not a or not g: continue
        am = a['ms'].get('decode', a['ms'].get('t_decode_ms'))
        gm = g['ms'].get('decode', g['ms'].get('t_decode_ms'))
        amod = sum(n*prof[k] for k,n in enumerate(a['pass_rows']) if k>0)
        gmod = sum(n*prof[k] for k,n in enumerate(g['pass_rows']) if k>0)
        out.append((g['category'][:5], pid, am/amod, gm/gmod, g['speedup'], g['modelled_speedup'], g['target_passes'], g['nodes_verified']/g['target_passes']))
        tot['ar_meas']+=am; tot['ar_mod']+=amod; tot['g_meas']+=gm; tot['g_mod']+=gmod
    print(path, 'ar meas/mod %.3f graft meas/mod %.3f' % (tot['ar_meas']/tot['ar_mod'], tot['g_meas']/tot['g_mod']))
    for o in sorted(out): print('  %-6s %4s ar %.2f graft %.2f | speedup %.2f modelled %.2f passes %d rows/pass %.1f' % o)
