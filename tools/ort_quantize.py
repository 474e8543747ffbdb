#!/usr/bin/env python3
"""ONNX Runtime's own int4 quantizer (MatMulNBitsQuantizer, its defaults: asymmetric, no accuracy_level) over a
model folder, the other files of the folder copied — the file a user who quantizes with ONNX Runtime holds, for
bench/ and the tests to run tern on.

  python3 tools/ort_quantize.py SRC_DIR OUT_DIR [--block 128] [--symmetric] [--accuracy-level N] [--bits 4]

Needs onnxruntime and onnx (bench/requirements.txt)."""
import argparse
import os
import shutil

import onnx
from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--symmetric", action="store_true")
    ap.add_argument("--accuracy-level", type=int, default=None)
    a = ap.parse_args()
    model = onnx.load(os.path.join(a.src, "model.onnx"))
    q = MatMulNBitsQuantizer(model, bits=a.bits, block_size=a.block, is_symmetric=a.symmetric, accuracy_level=a.accuracy_level)
    q.process()
    os.makedirs(a.out, exist_ok=True)
    onnx.save_model(q.model.model, os.path.join(a.out, "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx.data", size_threshold=1024)
    for name in os.listdir(a.src):
        if not name.startswith("model.onnx") and os.path.isfile(os.path.join(a.src, name)):
            shutil.copy(os.path.join(a.src, name), os.path.join(a.out, name))
    print(f"wrote {a.out}: MatMulNBits {a.bits}-bit, block {a.block}, {'symmetric' if a.symmetric else 'asymmetric'}, accuracy_level {a.accuracy_level}")


if __name__ == "__main__":
    main()
