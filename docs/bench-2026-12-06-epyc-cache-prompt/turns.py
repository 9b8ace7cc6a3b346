# Usage: turns.py GRAFT_BINARY [CONVERSATIONS] [QUESTION_JSONL]
# Two-turn chats against `graft serve` with and without --cache-prompt (default pair):
# the second turn's wall time and prompt tokens cached, side by side.
import json, re, subprocess, sys, time, http.client
GRAFT = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 4
qs = [json.loads(l) for l in open(sys.argv[3] if len(sys.argv) > 3 else '../shared/data/spec_bench/question.jsonl')]
qs = [q for q in qs if len(q['turns']) == 2][:N]

def start(extra):
    p = subprocess.Popen([GRAFT, 'serve', '--port', '0', '-c', '2048', *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.search(r':(\d+)', line)
    return p, int(m.group(1))

def chat(port, messages, n=64):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=600)
    body = json.dumps({'model': 'x', 'messages': messages, 'max_tokens': n, 'temperature': 0})
    t = time.time()
    c.request('POST', '/v1/chat/completions', body, {'Content-Type': 'application/json'})
    r = json.loads(c.getresponse().read())
    return time.time() - t, r

rows = {}
for mode, extra in (('off', []), ('on', ['--cache-prompt'])):
    p, port = start(extra)
    try:
        for q in qs:
            m = [{'role': 'user', 'content': q['turns'][0]}]
            t1, r1 = chat(port, m)
            m += [{'role': 'assistant', 'content': r1['choices'][0]['message']['content']}, {'role': 'user', 'content': q['turns'][1]}]
            t2, r2 = chat(port, m)
            u = r2['usage']
            rows.setdefault(q['question_id'], {})[mode] = (t2, u['prompt_tokens'], u['prompt_tokens_details']['cached_tokens'], r2['choices'][0]['message']['content'])
            print(mode, q['question_id'], f"turn1 {t1:.2f}s turn2 {t2:.2f}s prompt {u['prompt_tokens']} cached {u['prompt_tokens_details']['cached_tokens']}", flush=True)
    finally:
        p.terminate(); p.wait()
tot = {'off': 0, 'on': 0}
same = 0
for qid, r in rows.items():
    for k in tot: tot[k] += r[k][0]
    same += r['off'][3] == r['on'][3]
print(f"second turns: {tot['off']:.2f}s without, {tot['on']:.2f}s with --cache-prompt ({tot['off']/tot['on']:.2f}x); identical answers {same}/{len(rows)}")
for qid, r in rows.items():
    a, b = r['off'][3], r['on'][3]
    if a != b:
        k = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        print(qid, 'parts at char', k, 'of', len(a), repr(a[max(0,k-40):k+30]), '|', repr(b[max(0,k-40):k+30]))
