#!/usr/bin/env python3
"""Writes a Llama-shaped model with random weights as one F32 GGUF, the common source of bench/peers.sh:
llama.cpp's own llama-quantize makes its F16 and Q4_0 files from it, and `tern import-gguf` makes the ONNX
folders tern and ONNX Runtime run — so every engine reads the same weights (and the int4 rows the same
Q4_0 blocks).

  ~/.cache/tern/peers-venv/bin/python tools/make_bench_gguf.py --shape 1b --out /tmp/peers/f32.gguf

Shapes as make_bench_model.py (tools/llama_shapes.py). The vocabulary is a stand-in for a byte-level BPE
(llama.cpp's "gpt2" tokenizer model): <unk>, <s>, </s>, the 256 byte symbols, one merge, then filler tokens —
enough for both engines to load it; the benchmarks feed token ids. Random weights make random text: these
files measure speed, not quality. Needs numpy and gguf (bench/requirements.txt; bench/peers.sh makes the venv).
"""
import argparse
import os
import sys

import gguf
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_shapes import BENCH_SHAPES  # noqa: E402


def byte_symbols():
    """GPT-2's printable stand-ins for the 256 byte values (byte-level BPE's base alphabet)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=BENCH_SHAPES, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    s = BENCH_SHAPES[a.shape]
    rng = np.random.default_rng(a.seed)
    D, HD = s.hidden, s.head_dim

    def linear(n_out, n_in):  # torch.nn.Linear's default range, stored [out, in] as GGUF expects from numpy
        bound = 1.0 / np.sqrt(n_in)
        return rng.uniform(-bound, bound, size=(n_out, n_in)).astype(np.float32)

    def norm():
        return (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name(f"tern bench {a.shape}")
    w.add_context_length(s.max_positions)
    w.add_embedding_length(D)
    w.add_block_count(s.layers)
    w.add_feed_forward_length(s.ffn)
    w.add_head_count(s.heads)
    w.add_head_count_kv(s.kv_heads)
    w.add_rope_dimension_count(HD)
    w.add_rope_freq_base(s.rope_theta)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(s.vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    specials = ["<unk>", "<s>", "</s>"]
    tokens = specials + byte_symbols() + ["to"]  # one merge: GGUF writers drop empty arrays
    tokens += [f"tok{i}" for i in range(s.vocab - len(tokens))]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL] * len(specials) + [gguf.TokenType.NORMAL] * (s.vocab - len(specials)))
    w.add_token_merges(["t o"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)

    w.add_tensor("token_embd.weight", (0.02 * rng.standard_normal((s.vocab, D))).astype(np.float32))
    for i in range(s.layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", norm())
        w.add_tensor(b + "attn_q.weight", linear(s.heads * HD, D))
        w.add_tensor(b + "attn_k.weight", linear(s.kv_heads * HD, D))
        w.add_tensor(b + "attn_v.weight", linear(s.kv_heads * HD, D))
        w.add_tensor(b + "attn_output.weight", linear(D, s.heads * HD))
        w.add_tensor(b + "ffn_norm.weight", norm())
        w.add_tensor(b + "ffn_gate.weight", linear(s.ffn, D))
        w.add_tensor(b + "ffn_up.weight", linear(s.ffn, D))
        w.add_tensor(b + "ffn_down.weight", linear(D, s.ffn))
    w.add_tensor("output_norm.weight", norm())
    if not s.tied:
        w.add_tensor("output.weight", linear(s.vocab, D))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}: {a.shape} F32, {os.path.getsize(a.out) / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
