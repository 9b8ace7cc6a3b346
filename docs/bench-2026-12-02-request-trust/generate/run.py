# Cold vs warm learned state on chat prompts: graft generate --compare, side by side with ar.
import json, subprocess, sys, os, shutil, collections
G = sys.argv[3] if len(sys.argv) > 3 else "build/graft"
qs = [json.loads(l) for l in open('/work/shared/data/spec_bench/question.jsonl')]
bycat = collections.defaultdict(list)
for q in qs:
    cat = 'mt_bench' if q['question_id'] <= 80 else q['category']
    bycat[cat].append(q)
cats = ['mt_bench', 'translation', 'summarization', 'qa', 'math_reasoning', 'rag']
train = [q for c in cats for q in bycat[c][10:12]]
test = [q for c in cats for q in bycat[c][20:22]]
out = sys.argv[1]
state = out + '/warm.json'
n = sys.argv[2] if len(sys.argv) > 2 else '96'

def gen(q, extra):
    p = out + '/prompt.txt'
    open(p, 'w').write(q['turns'][0][:3000])
    r = subprocess.run([G, 'generate', '-f', p, '-n', n, '--json', '--compare'] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr[-2000:]); raise SystemExit(1)
    return json.loads(r.stdout)

if not os.path.exists(state):
    for q in train:
        j = gen(q, ['--learned-state', state])
        print('train', q['question_id'], round(j['speedup'], 3), flush=True)
shutil.copy(state, out + '/warm-frozen.json')
rows = []
for q in test:
    for cond in ['cold', 'warm']:
        extra = ['--no-learned-state'] if cond == 'cold' else ['--learned-state', out + '/warm-copy.json']
        if cond == 'warm': shutil.copy(out + '/warm-frozen.json', out + '/warm-copy.json')
        j = gen(q, extra)
        s = j['stats']
        row = dict(id=q['question_id'], cat=q['category'] if q['question_id'] > 80 else 'mt_bench', cond=cond,
                   speedup=j['speedup'], same=j['identical_to_ar'], passes=s.get('passes', s.get('n_passes')),
                   ar_passes=j['ar'].get('passes', j['ar'].get('n_passes')), stats=s, ar=j['ar'])
        rows.append(row)
        print(cond, row['id'], row['cat'], round(row['speedup'], 3), row['same'], flush=True)
json.dump(rows, open(out + '/rows.json', 'w'), indent=1)
