# Does a KV cache filled by one-token decoding (a chat's first answer) give other logits
# at the next turn than one batched prefill? Greedy first turn of Spec-Bench question 86
# on the default target, then the second turn's first-token logits, cached vs fresh.
import json, sys, os
import numpy as np
from llama_cpp import Llama
M = os.path.expanduser('~/.cache/graft/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf')
qid = int(sys.argv[1]) if len(sys.argv) > 1 else 86
q = [json.loads(l) for l in open(os.environ.get('GRAFT_QUESTIONS', '../shared/data/spec_bench/question.jsonl')) if json.loads(l)['question_id'] == qid][0]
def chatml(msgs):
    return ''.join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs) + "<|im_start|>assistant\n"
llm = Llama(M, n_ctx=2048, n_threads=2, n_batch=512, logits_all=True, verbose=False)
t1 = llm.tokenize(chatml([{'role': 'user', 'content': q['turns'][0]}]).encode(), add_bos=False, special=True)
llm.reset(); llm.eval(t1)
ans = []
for _ in range(64):
    tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    if tok == llm.token_eos(): break
    ans.append(tok); llm.eval([tok])          # one token at a time, as decoding
text = llm.detokenize(ans).decode('utf-8', 'replace')
t2 = llm.tokenize(chatml([{'role': 'user', 'content': q['turns'][0]}, {'role': 'assistant', 'content': text},
                          {'role': 'user', 'content': q['turns'][1]}]).encode(), add_bos=False, special=True)
cache = t1 + ans[:-1]
common = 0
while common < min(len(cache), len(t2) - 1) and cache[common] == t2[common]: common += 1
llm._ctx.kv_cache_seq_rm(-1, common, -1) if hasattr(llm._ctx, 'kv_cache_seq_rm') else llm._ctx.memory_seq_rm(-1, common, -1)
llm.n_tokens = common
llm.eval(t2[common:])
cached = np.array(llm.scores[llm.n_tokens - 1])
llm.reset(); llm.eval(t2)
fresh = np.array(llm.scores[llm.n_tokens - 1])
def top2(l):
    i = np.argsort(-l)[:2]; return [(llm.detokenize([int(k)]).decode('utf-8', 'replace'), round(float(l[k]), 3)) for k in i]
print(f"q{qid}: turn 2 prompt {len(t2)} tokens, {common} cached")
print("fresh  top2", top2(fresh), "gap", round(float(np.sort(fresh)[-1] - np.sort(fresh)[-2]), 3))
print("cached top2", top2(cached), "gap", round(float(np.sort(cached)[-1] - np.sort(cached)[-2]), 3))
print("max |logit diff|", round(float(np.max(np.abs(fresh - cached))), 3))
