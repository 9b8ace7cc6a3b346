# For each ar row of a graft bench results.json: the target's top-1 minus top-2 logit
# (and top-1 probability) at the row that predicted each output token, from one batched
# pass over prompt + output. Writes {prompt_id: [[(margin, p1) per output token] per turn]}.
import json, sys, numpy as np
from llama_cpp import Llama
res, model, out = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(res))
llm = Llama(model_path=model, n_ctx=4096, n_batch=512, n_threads=2, logits_all=True, verbose=False)
res_out = {}
for r in d['rows']:
    if r['method'] != 'ar': continue
    turns = []
    ctx = []
    for prompt, output in zip(r['prompt_tokens'], r['output_tokens']):
        # each turn's prompt holds the whole conversation so far
        llm.reset()
        llm._logits_all = False
        llm.eval(prompt[:-1])
        llm._logits_all = True
        n0 = llm.n_tokens
        llm.eval([prompt[-1]] + output[:-1])
        sc = llm.scores[n0:n0 + len(output), :]
        top2 = np.partition(sc, -2, axis=1)[:, -2:]
        m = (top2.max(axis=1) - top2.min(axis=1))
        mx = sc.max(axis=1, keepdims=True)
        p1 = 1.0 / np.exp(sc - mx).sum(axis=1)
        am = sc.argmax(axis=1)
        agree = float((am == np.array(output)).mean())
        turns.append([[float(a), float(b)] for a, b in zip(m, p1)])
        print(r['prompt_id'], len(prompt), len(output), 'argmax agrees %.2f' % agree, 'median margin %.2f' % float(np.median(m)), flush=True)
    res_out[r['prompt_id']] = turns
json.dump(res_out, open(out, 'w'))
