#!/usr/bin/env python3
"""One MatMulNBits decode row (M = 1) in tern and ONNX Runtime on the same file: random asymmetric blocks (packed
zero points) of each BITS:BLOCK given, K x N weights, 2 threads each, ROUNDS alternated rounds, medians printed
with the weights' GB/s in tern.
    python3 bench/nbits_decode.py [--k 4096] [--n 14336] [--rounds 3] [2:32 2:128 4:32 8:32 ...]
(Python with numpy, onnx, onnxruntime and tern's wheel: scripts/wheel.sh, then pip install it.)"""
import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tern
from onnx import TensorProto, helper


def model(path, K, N, bits, block, rng):
    kb = K // block
    q = rng.integers(0, 256, (N, kb, block * bits // 8), dtype=np.uint8)
    scales = (rng.random(N * kb) * 0.01).astype(np.float32)
    zp = rng.integers(0, 256, N * ((kb * bits + 7) // 8), dtype=np.uint8)
    inits = [helper.make_tensor("B", TensorProto.UINT8, q.shape, q.tobytes(), raw=True),
             helper.make_tensor("scales", TensorProto.FLOAT, scales.shape, scales.tobytes(), raw=True),
             helper.make_tensor("zp", TensorProto.UINT8, zp.shape, zp.tobytes(), raw=True)]
    node = helper.make_node("MatMulNBits", ["A", "B", "scales", "zp"], ["Y"], domain="com.microsoft", K=K, N=N, bits=bits,
                            block_size=block)
    graph = helper.make_graph([node], "nbits", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [1, K])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, N])], inits)
    Path(path).write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                                   helper.make_opsetid("com.microsoft", 1)]).SerializeToString())
    return N * K * bits / 8 + N * kb * 4 + zp.nbytes


def ms_per_call(run):
    """Milliseconds a call over ~0.5 s of calls (at least 3), after a warm-up."""
    start = time.perf_counter()
    run()
    n = max(3, min(200, int(0.5 / max(time.perf_counter() - start, 1e-6))))
    for _ in range(min(20, n)):
        run()
    start = time.perf_counter()
    for _ in range(n):
        run()
    return (time.perf_counter() - start) / n * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=14336)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("kinds", nargs="*", default=["2:32", "2:128", "4:32", "8:32"])
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, a.k)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        for kind in a.kinds:
            bits, block = (int(v) for v in kind.split(":"))
            path = f"{tmp}/nbits_{bits}_{block}.onnx"
            nbytes = model(path, a.k, a.n, bits, block, rng)
            so = ort.SessionOptions()
            so.intra_op_num_threads, so.inter_op_num_threads = 2, 1
            theirs = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            ours = tern.InferenceSession(path, threads=2)
            gap = float(np.abs(theirs.run(None, {"A": x})[0] - ours.run(None, {"A": x})[0]).max())
            t, o = [], []
            for r in range(a.rounds):
                t.append(ms_per_call(lambda: ours.run(None, {"A": x})))
                o.append(ms_per_call(lambda: theirs.run(None, {"A": x})))
                print(f"  {bits}-bit block {block} round {r + 1}: tern {t[-1]:.3f} ms, ONNX Runtime {o[-1]:.3f} ms", flush=True)
            mt, mo = statistics.median(t), statistics.median(o)
            print(f"{bits}-bit block {block}, {a.k}x{a.n}: tern {mt:.3f} ms ({nbytes / mt / 1e6:.1f} GB/s), ONNX Runtime "
                  f"{mo:.3f} ms: {mo / mt:.2f}x; outputs within {gap:.1e}", flush=True)


if __name__ == "__main__":
    main()
