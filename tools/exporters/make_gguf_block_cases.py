#!/usr/bin/env python3
"""Writes tests/fixtures/gguf_blocks/cases.json: for each ggml block type tern imports, random blocks (scale
fields set to sane fp16 values, everything else random bytes) and their values as the `gguf` package
(llama.cpp's own Python reader, gguf.quants.dequantize) decodes them — the oracle of test_gguf.cpp.
Run from the tools venv:  ~/.cache/tern/venv/bin/python tools/exporters/make_gguf_block_cases.py
"""
import json
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

rng = np.random.default_rng(16)
# Byte offsets of each block's fp16 scale fields (ggml-common.h's block structs).
HALVES = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.Q2_K: [80, 82], T.Q3_K: [108],
          T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}
cases = {}
for qtype, halves in HALVES.items():
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = max(2, 256 // block_elems)
    raw = bytearray(rng.integers(0, 256, n_blocks * block_bytes, dtype=np.uint8).tobytes())
    for b in range(n_blocks):
        for off in halves:
            raw[b * block_bytes + off: b * block_bytes + off + 2] = np.float16(rng.uniform(-0.1, 0.1)).tobytes()
    values = dequantize(np.frombuffer(bytes(raw), dtype=np.uint8), qtype).astype(np.float32).reshape(-1)
    cases[qtype.name] = {"type": int(qtype), "bytes": bytes(raw).hex(), "values": [float(v) for v in values]}
out = pathlib.Path(__file__).resolve().parents[2] / "tests/fixtures/gguf_blocks/cases.json"
out.write_text(json.dumps(cases))
print("wrote", out, ", ".join(f"{k}: {len(v['values'])}" for k, v in cases.items()))
