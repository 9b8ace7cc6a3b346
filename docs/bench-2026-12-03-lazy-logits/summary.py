import json,math,sys
def g(v): return math.exp(sum(map(math.log,v))/len(v)) if v else float('nan')
for f in sys.argv[1:]:
    r=json.load(open(f+'/results.json'))
    rows=[x for x in r['rows'] if x['method']=='graft']
    cats={}
    for x in rows: cats.setdefault(x['category'],[]).append(x['speedup'])
    lossless=sum(1 for x in rows if x['lossless'])
    print('%-16s all %.3f mod %.3f e2e %.3f | '%(f.split('/')[-1], g([x['speedup'] for x in rows]), g([x['modelled_speedup'] for x in rows]), g([x['e2e_speedup'] for x in rows])) + ' '.join('%s %.2f'%(c[:5],g(v)) for c,v in sorted(cats.items())), '| of_profile %.2f'%r['steadiness'].get('of_profile',0), 'lossless %d/%d'%(lossless,len(rows)), 'min %.2f'%min(x['speedup'] for x in rows))
