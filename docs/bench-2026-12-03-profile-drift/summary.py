import json,sys,math,collections
for f in sys.argv[1:]:
    r=json.load(open(f+'/results.json'))
    ar={x['prompt_id']:x for x in r['rows'] if x['method']=='ar'}
    g=[x for x in r['rows'] if x['method']=='graft']
    gm=lambda v: math.exp(sum(math.log(t) for t in v)/len(v))
    cat=collections.defaultdict(list)
    for x in g: cat[x['category']].append(x['speedup'])
    multi=sum(sum(x['pass_rows'][2:]) for x in g); acc=sum(x['accepted'] for x in g); prop=sum(x['grafted']+x['drafted'] for x in g)
    same=sum(1 for x in g if x['first_divergence']==-1)
    print(f, 'sp %.3f mod %.3f e2e %.3f'%(gm([x['speedup'] for x in g]), gm([x['modelled_speedup'] for x in g]), gm([x['e2e_speedup'] for x in g])),
      'of_profile %.2f'%r['steadiness']['of_profile'], 'multi', multi, 'acc %d/%d'%(acc,prop), 'min %.3f'%min(x['speedup'] for x in g), 'same', same,
      ' '.join('%s %.2f'%(k[:5],gm(v)) for k,v in sorted(cat.items())))
