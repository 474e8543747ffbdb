#!/usr/bin/env python3
"""Writes examples/tiny_llama_block: one Llama-style decoder layer (embedding, RMSNormalization,
GQA Attention with RotaryEmbedding, SwiGLU MLP, tied LM head) built from standard opset-23 ops,
with random weights (seed 0), plus test_data_set_0 whose expected logits are computed here in
plain numpy, independently of tern.

Needs Debian's python3-onnx and python3-numpy:  /usr/bin/python3 tools/make_example_model.py
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD, FFN, SEQ, MAX_POS = 64, 32, 4, 2, 8, 64, 6, 32
rng = np.random.default_rng(0)


def w(*shape, scale=0.2):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


weights = {
    "embed": w(VOCAB, HIDDEN, scale=1.0),
    "ln1": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
    "wq": w(HIDDEN, HEADS * HEAD), "wk": w(HIDDEN, KV_HEADS * HEAD), "wv": w(HIDDEN, KV_HEADS * HEAD),
    "wo": w(HEADS * HEAD, HIDDEN),
    "ln2": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
    "wg": w(HIDDEN, FFN), "wu": w(HIDDEN, FFN), "wd": w(FFN, HIDDEN),
    "lnf": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
}
inv_freq = 1.0 / (10000 ** (np.arange(0, HEAD, 2, dtype=np.float64) / HEAD))
angles = np.outer(np.arange(MAX_POS), inv_freq)
weights["cos"] = np.cos(angles).astype(np.float32)
weights["sin"] = np.sin(angles).astype(np.float32)
weights["lm_head"] = np.ascontiguousarray(weights["embed"].T)
weights["q_shape"] = np.array([1, -1, HEADS, HEAD], dtype=np.int64)
weights["kv_shape"] = np.array([1, -1, KV_HEADS, HEAD], dtype=np.int64)
weights["out_shape"] = np.array([1, -1, HEADS * HEAD], dtype=np.int64)

N = helper.make_node
nodes = [
    N("Gather", ["embed", "input_ids"], ["h0"]),
    N("RMSNormalization", ["h0", "ln1"], ["x1"], epsilon=1e-5),
    N("MatMul", ["x1", "wq"], ["q"]), N("MatMul", ["x1", "wk"], ["k"]), N("MatMul", ["x1", "wv"], ["v"]),
    N("Reshape", ["q", "q_shape"], ["q4"]), N("Reshape", ["k", "kv_shape"], ["k4"]),
    N("Reshape", ["v", "kv_shape"], ["v4"]),
    N("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]), N("Transpose", ["k4"], ["kt"], perm=[0, 2, 1, 3]),
    N("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
    N("RotaryEmbedding", ["qt", "cos", "sin", "position_ids"], ["qr"]),
    N("RotaryEmbedding", ["kt", "cos", "sin", "position_ids"], ["kr"]),
    N("Attention", ["qr", "kr", "vt"], ["att"], is_causal=1),
    N("Transpose", ["att"], ["att_t"], perm=[0, 2, 1, 3]),
    N("Reshape", ["att_t", "out_shape"], ["att2"]),
    N("MatMul", ["att2", "wo"], ["o"]), N("Add", ["h0", "o"], ["h1"]),
    N("RMSNormalization", ["h1", "ln2"], ["x2"], epsilon=1e-5),
    N("MatMul", ["x2", "wg"], ["g"]), N("MatMul", ["x2", "wu"], ["u"]),
    N("Sigmoid", ["g"], ["sg"]), N("Mul", ["g", "sg"], ["silu"]), N("Mul", ["silu", "u"], ["gu"]),
    N("MatMul", ["gu", "wd"], ["d"]), N("Add", ["h1", "d"], ["h2"]),
    N("RMSNormalization", ["h2", "lnf"], ["x3"], epsilon=1e-5),
    N("MatMul", ["x3", "lm_head"], ["logits"]),
]
graph = helper.make_graph(
    nodes, "tiny_llama_block",
    [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "sequence_length"]),
     helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, "sequence_length"])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "sequence_length", VOCAB])],
    [numpy_helper.from_array(v, k) for k, v in weights.items()])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], producer_name="tern/tools")
model.ir_version = 10


# ---- independent numpy reference ----
def rms(x, g):
    return x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + 1e-5) * g


def rope(x, pos):  # x [B, H, S, D], rotate-half pairs (i, i + D/2)
    c, s = weights["cos"][pos][:, None], weights["sin"][pos][:, None]  # [S, 1, D/2] -> broadcast per head
    c, s = c.transpose(1, 0, 2), s.transpose(1, 0, 2)
    x1, x2 = x[..., :HEAD // 2], x[..., HEAD // 2:]
    return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)


ids = rng.integers(0, VOCAB, size=(1, SEQ)).astype(np.int64)
pos = np.arange(SEQ, dtype=np.int64)[None]
W = weights
h0 = W["embed"][ids]
x1 = rms(h0, W["ln1"])
q = (x1 @ W["wq"]).reshape(1, SEQ, HEADS, HEAD).transpose(0, 2, 1, 3)
k = (x1 @ W["wk"]).reshape(1, SEQ, KV_HEADS, HEAD).transpose(0, 2, 1, 3)
v = (x1 @ W["wv"]).reshape(1, SEQ, KV_HEADS, HEAD).transpose(0, 2, 1, 3)
q, k = rope(q, pos[0]), rope(k, pos[0])
k, v = np.repeat(k, HEADS // KV_HEADS, axis=1), np.repeat(v, HEADS // KV_HEADS, axis=1)
scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(HEAD)
scores = scores + np.triu(np.full((SEQ, SEQ), -np.inf), k=1)
p = np.exp(scores - scores.max(-1, keepdims=True))
p /= p.sum(-1, keepdims=True)
att = (p @ v).transpose(0, 2, 1, 3).reshape(1, SEQ, HEADS * HEAD)
h1 = h0 + att @ W["wo"]
x2 = rms(h1, W["ln2"])
g = x2 @ W["wg"]
h2 = h1 + ((g / (1 + np.exp(-g))) * (x2 @ W["wu"])) @ W["wd"]
logits = (rms(h2, W["lnf"]) @ W["lm_head"]).astype(np.float32)

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "examples", "tiny_llama_block")
os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
with open(os.path.join(out, "model.onnx"), "wb") as f:
    f.write(model.SerializeToString())
for name, arr in [("input_0", ids), ("input_1", pos), ("output_0", logits)]:
    t = numpy_helper.from_array(arr, {"input_0": "input_ids", "input_1": "position_ids", "output_0": "logits"}[name])
    with open(os.path.join(out, "test_data_set_0", name + ".pb"), "wb") as f:
        f.write(t.SerializeToString())
print("wrote", out, "logits", logits.shape, "argmax", logits.argmax(-1).tolist())
