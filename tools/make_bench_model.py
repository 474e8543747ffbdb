#!/usr/bin/env python3
"""Writes a Llama-shaped model with random weights for benchmarks: torch.onnx.export in the Optimum
layout (the decomposed graph real exports have), weights in one external-data file next to it.

  /usr/bin/python3 tools/make_bench_model.py --shape 1b --out /tmp/llama-1b-fp32
  /usr/bin/python3 tools/make_bench_model.py --shape 135m --dtype int4 --out /tmp/llama-135m-int4

Shapes: 1b = Llama-3.2-1B (hidden 2048, 16 layers, 32 heads, 8 KV heads, FFN 8192, vocab 128256, tied
embeddings, RoPE theta 500000); 135m = SmolLM-135M (hidden 576, 30 layers, 9 heads, 3 KV heads, FFN 1536,
vocab 49152, tied); tiny = a 2-layer toy for smoke tests. Dtypes: fp32, int4 (MatMulNBits, block 32).
Random weights make random text: these models measure speed, not quality. The folder's tokenizer.json
(byte-level BPE without merges: text encodes to one token a byte; every other id decodes to three bytes)
lets `tern serve` and the text tools run it: `--tokenizer-only --out DIR` adds it to an existing folder.

Needs torch, onnx and numpy: Debian's python3-torch (1.13) or a current torch (the venv's; the TorchScript
exporter is asked for, torch >= 2.9 defaulting to dynamo). The 1b fp32 export takes a few
minutes and about 12 GB of memory on this machine; the folder holds ~6 GB (fp32: the export folds the tied head into a second, transposed copy) or ~1.7 GB (int4).
"""
import argparse
import json
import os
import shutil
import tempfile

import onnx
import torch

from llama_shapes import BENCH_SHAPES
from torch_llama import Llama, export_optimum, quantize_matmul_nbits, write_configs

def byte_to_unicode():
    """GPT-2's byte-level alphabet: each byte as a printable character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_byte_tokenizer(out, vocab):
    """tokenizer.json covering ids 0..vocab-1: the 256 bytes, then id 256 + k as k's three bytes."""
    b2u = byte_to_unicode()
    pieces = {b2u[b]: b for b in range(256)}
    for k in range(vocab - 256):
        pieces["".join(b2u[x] for x in ((k >> 16) & 255, (k >> 8) & 255, k & 255))] = 256 + k
    tok = {"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "vocab": pieces, "merges": [], "ignore_merges": False, "byte_fallback": False}}
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=BENCH_SHAPES, required=True)
    ap.add_argument("--dtype", choices=["fp32", "int4"], default="fp32")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer-only", action="store_true", help="only write tokenizer.json into --out")
    a = ap.parse_args()
    s = BENCH_SHAPES[a.shape]
    if a.tokenizer_only:
        write_byte_tokenizer(a.out, s.vocab)
        return
    torch.manual_seed(a.seed)
    model = Llama(s).eval()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=a.out) as tmp:
        export_optimum(model, os.path.join(tmp, "model.onnx"))  # > 2 GB: torch writes one file per tensor
        del model
        m = onnx.load(os.path.join(tmp, "model.onnx"))
    if a.dtype == "int4":
        quantize_matmul_nbits(m, block=32)
    for f in ("model.onnx", "model.onnx_data"):
        if os.path.exists(os.path.join(a.out, f)):
            os.remove(os.path.join(a.out, f))
    onnx.save_model(m, os.path.join(a.out, "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx_data", size_threshold=1024)
    write_byte_tokenizer(a.out, s.vocab)
    write_configs(a.out, s, f"tools/make_bench_model.py --shape {a.shape} --dtype {a.dtype} --seed {a.seed}")
    total = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out))
    print(f"wrote {a.out}: {a.shape} {a.dtype}, {total / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
