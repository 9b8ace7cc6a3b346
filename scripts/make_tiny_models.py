#!/usr/bin/env python3
"""Writes tiny random-weight GGUF models for fast, deterministic exactness tests.

They borrow the SmolLM2 tokenizer (49152 tokens) so prompts tokenize like real
text, but their weights are seeded random numbers: outputs are nonsense, yet
deterministic, peaked (no near-ties) and cheap to evaluate (a few ms per pass).

  tiny-target.gguf         llama architecture, 2 layers, n_embd 64
  tiny-draft.gguf          1 layer sharing the target's embeddings and output head,
                           so its proposals agree with the target part of the time
  tiny-draft-badvocab.gguf same as tiny-draft, one token text changed: a draft the
                           engine must refuse (same size, different tokenizer)

Usage: make_tiny_models.py SMOLLM2_GGUF OUT_DIR
Files are written to a temporary name and renamed, so a killed run leaves none.
"""
import os
import sys

import numpy as np
from gguf import GGUFReader, GGUFWriter, GGMLQuantizationType, TokenType  # noqa: F401

N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 2
N_FF = 128
CTX = 4096
VERSION = 2  # bump when the recipe changes (scripts/setup.sh regenerates on mismatch)


def read_tokenizer(path):
    r = GGUFReader(path)
    f = r.fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8", errors="surrogateescape")
              for i in f["tokenizer.ggml.tokens"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    merges = [bytes(f["tokenizer.ggml.merges"].parts[i]).decode("utf-8", errors="surrogateescape")
              for i in f["tokenizer.ggml.merges"].data]
    scalars = {k: int(f[k].parts[-1][0]) for k in (
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id")}
    pre = bytes(f["tokenizer.ggml.pre"].parts[-1]).decode()
    tmpl = bytes(f["tokenizer.chat_template"].parts[-1]).decode() if "tokenizer.chat_template" in f else None
    return tokens, types, merges, scalars, pre, tmpl


def write_model(path, n_layer, seed, shared, tok, name):
    tokens, types, merges, scalars, pre, tmpl = tok
    n_vocab = len(tokens)
    rng = np.random.default_rng(seed)
    tmp = path + ".tmp"
    w = GGUFWriter(tmp, "llama")
    w.add_name(name)
    w.add_context_length(CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(n_vocab)
    w.add_file_type(0)  # all F32
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(scalars["tokenizer.ggml.bos_token_id"])
    w.add_eos_token_id(scalars["tokenizer.ggml.eos_token_id"])
    w.add_unk_token_id(scalars["tokenizer.ggml.unknown_token_id"])
    w.add_pad_token_id(scalars["tokenizer.ggml.padding_token_id"])
    w.add_add_bos_token(False)
    if tmpl:
        w.add_chat_template(tmpl)

    def mat(rows, cols, scale):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    w.add_tensor("token_embd.weight", shared["embd"])
    kv = N_EMBD // N_HEAD * N_HEAD_KV
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", mat(N_EMBD, N_EMBD, 0.3))
        w.add_tensor(f"blk.{i}.attn_k.weight", mat(kv, N_EMBD, 0.3))
        w.add_tensor(f"blk.{i}.attn_v.weight", mat(kv, N_EMBD, 0.3))
        w.add_tensor(f"blk.{i}.attn_output.weight", mat(N_EMBD, N_EMBD, 0.1))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", mat(N_FF, N_EMBD, 0.2))
        w.add_tensor(f"blk.{i}.ffn_up.weight", mat(N_FF, N_EMBD, 0.2))
        w.add_tensor(f"blk.{i}.ffn_down.weight", mat(N_EMBD, N_FF, 0.1))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    w.add_tensor("output.weight", shared["out"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    tok = read_tokenizer(src)
    n_vocab = len(tok[0])
    rng = np.random.default_rng(1234)
    shared = {
        "embd": (rng.standard_normal((n_vocab, N_EMBD))).astype(np.float32),
        # A large output scale makes the next-token distribution peaked: few near-ties.
        "out": (rng.standard_normal((n_vocab, N_EMBD)) * 1.0).astype(np.float32),
    }
    write_model(os.path.join(out, "tiny-target.gguf"), 2, 1, shared, tok, "graft tiny target")
    write_model(os.path.join(out, "tiny-draft.gguf"), 1, 2, shared, tok, "graft tiny draft")
    tokens = list(tok[0])
    tokens[1000] = tokens[1000] + "_x"
    bad = (tokens,) + tok[1:]
    write_model(os.path.join(out, "tiny-draft-badvocab.gguf"), 1, 2, shared, bad, "graft tiny bad vocab")
    with open(os.path.join(out, "tiny.version.tmp"), "w") as fh:
        fh.write(str(VERSION))
    os.replace(os.path.join(out, "tiny.version.tmp"), os.path.join(out, "tiny.version"))


if __name__ == "__main__":
    main()
