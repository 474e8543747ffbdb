#!/usr/bin/env python3
"""Writes a Llama-shaped model with random weights for benchmarks: torch.onnx.export in the Optimum
layout (the decomposed graph real exports have), weights in one external-data file next to it.

  /usr/bin/python3 tools/make_bench_model.py --shape 1b --out /tmp/llama-1b-fp32
  /usr/bin/python3 tools/make_bench_model.py --shape 135m --dtype int4 --out /tmp/llama-135m-int4

Shapes: 1b = Llama-3.2-1B (hidden 2048, 16 layers, 32 heads, 8 KV heads, FFN 8192, vocab 128256, tied
embeddings, RoPE theta 500000); 135m = SmolLM-135M (hidden 576, 30 layers, 9 heads, 3 KV heads, FFN 1536,
vocab 49152, tied); tiny = a 2-layer toy for smoke tests. Dtypes: fp32, int4 (MatMulNBits, block 32).
Random weights make random text: these models measure speed, not quality.

Needs Debian's python3-torch (1.13), python3-onnx, python3-numpy. The 1b fp32 export takes a few
minutes and about 12 GB of memory on this machine; the folder holds ~5 GB (fp32) or ~1.7 GB (int4).
"""
import argparse
import os
import shutil
import tempfile

import onnx
import torch

from llama_shapes import BENCH_SHAPES
from torch_llama import Llama, export_optimum, quantize_matmul_nbits, write_configs

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=BENCH_SHAPES, required=True)
    ap.add_argument("--dtype", choices=["fp32", "int4"], default="fp32")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    s = BENCH_SHAPES[a.shape]
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
    write_configs(a.out, s, f"tools/make_bench_model.py --shape {a.shape} --dtype {a.dtype} --seed {a.seed}")
    total = sum(os.path.getsize(os.path.join(a.out, f)) for f in os.listdir(a.out))
    print(f"wrote {a.out}: {a.shape} {a.dtype}, {total / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
