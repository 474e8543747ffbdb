#!/usr/bin/env python3
"""Writes three small Llama model folders under tests/fixtures/, all with the same random weights
(seed 0; vocab 320, hidden 64, 2 layers, 4 query heads sharing 2 KV heads, FFN 128):

  llama-gqa-torch/     torch.onnx.export of a plain PyTorch Llama (opset 17, Optimum layout:
                       input_ids, attention_mask, position_ids, past_key_values.N.key/value →
                       logits, present.N.key/value) — the decomposed graph real exports have
  llama-gqa-opset23/   the same model written with ONNX opset-23 RMSNormalization, RotaryEmbedding
                       and Attention
  llama-gqa-int4/      the torch export with every weight MatMul replaced by MatMulNBits
                       (4 bits, block 32, asymmetric with zero points)
  llama-gqa-msft/      the layout of onnxruntime-genai's model builder: one packed QKV MatMul into
                       com.microsoft GroupQueryAttention (do_rotary, cos/sin caches, seqlens_k from
                       attention_mask), SimplifiedLayerNormalization; no position_ids input
  llama-gqa-static24/  ONNX opset 24 with fixed-size caches: past_key_values.N.* are [B, KV, 128, HD]
                       buffers that TensorScatter (circular) updates at write index = past length, read
                       whole by Attention-24 with nonpad_kv_seqlen = past + new tokens; present = the
                       updated buffers (same shape). Inputs otherwise as Optimum's.

Needs Debian's python3-torch, python3-onnx, python3-numpy:  /usr/bin/python3 tools/make_llama_fixtures.py
Then: node tools/ort/greedy_goldens.mjs for each folder (see tests/fixtures/README.md).
"""
import json
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from torch_llama import Llama, LlamaShape, export_optimum, quantize_matmul_nbits, write_configs as write_shape_configs

SHAPE = LlamaShape(vocab=320, hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, max_positions=128)
V, D, L, H, KV, F, MAXPOS = SHAPE.vocab, SHAPE.hidden, SHAPE.layers, SHAPE.heads, SHAPE.kv_heads, SHAPE.ffn, SHAPE.max_positions
HD = D // H
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
torch.manual_seed(0)


def write_configs(d, note):
    write_shape_configs(d, SHAPE, note)


def causal_padding_bias(columns, mask):
    """bias [B, 1, S, columns]: 0 where new token i (at position past + i) may see key j ≤ its position that
    `mask` keeps, float32 min elsewhere (needs past, total, zero, one, ax0/ax1/ax12, allowed, masked)."""
    N("Range", ["past", "total", "one"], ["rows"]); N("Range", ["zero", columns, "one"], ["cols"])
    N("Unsqueeze", ["cols", "ax0"], ["cols2"]); N("Unsqueeze", ["rows", "ax1"], ["rows2"]); N("LessOrEqual", ["cols2", "rows2"], ["causal"])
    N("Cast", [mask], ["keep"], to=TensorProto.BOOL); N("Unsqueeze", ["keep", "ax12"], ["keep4"])
    N("And", ["causal", "keep4"], ["ok"]); N("Where", ["ok", "allowed", "masked"], ["bias"])


def add_layer_weights(p):
    """Layer p's projections as [in, out] initializers and its two norm weights (into the current inits)."""
    for nm in ("q", "k", "v", "o", "gate", "up", "down"):
        inits[p + nm] = W[p + nm + ".weight"].T.copy()
    inits[p + "ln1"], inits[p + "ln2"] = W[p + "ln1"], W[p + "ln2"]


def attention_out_and_mlp(p, h, i, norm, norm_attrs):
    """Layer i after attention (output p + "att"): o projection, residual, norm, SwiGLU MLP, residual."""
    N("MatMul", [p + "att", p + "o"], [p + "o_"]); N("Add", [h, p + "o_"], [p + "h1"])
    N(norm, [p + "h1", p + "ln2"], [p + "x2"], epsilon=1e-5, **norm_attrs)
    N("MatMul", [p + "x2", p + "gate"], [p + "g"]); N("MatMul", [p + "x2", p + "up"], [p + "u"])
    N("Sigmoid", [p + "g"], [p + "sg"]); N("Mul", [p + "g", p + "sg"], [p + "silu"]); N("Mul", [p + "silu", p + "u"], [p + "gu"])
    N("MatMul", [p + "gu", p + "down"], [p + "d"]); N("Add", [p + "h1", p + "d"], [f"h{i + 1}"])
    return f"h{i + 1}"


model = Llama(SHAPE, weight_gain=2.0).eval()
names_in = ["input_ids", "attention_mask", "position_ids"] + [f"past_key_values.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
names_out = ["logits"] + [f"present.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
torch_dir = os.path.join(OUT, "llama-gqa-torch")
write_configs(torch_dir, "torch.onnx.export, opset 17")
export_optimum(model, os.path.join(torch_dir, "model.onnx"))
W = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}

# ---- the same weights in opset-23 ops ----
ops23 = os.path.join(OUT, "llama-gqa-opset23")
write_configs(ops23, "opset 23 RMSNormalization / RotaryEmbedding / Attention")
inits, nodes = {}, []
N = lambda *a, **k: nodes.append(helper.make_node(*a, **k))
t = np.arange(MAXPOS)[:, None] * W["inv_freq"][None, :]
inits.update({"embed": W["embed.weight"], "cos": np.cos(t).astype(np.float32), "sin": np.sin(t).astype(np.float32),
              "norm": W["norm"], "lm_head": W["lm_head.weight"].T.copy(), "one": np.array(1, np.int64), "zero": np.array(0, np.int64),
              "ax0": np.array([0], np.int64), "ax1": np.array([1], np.int64), "ax12": np.array([1, 2], np.int64),
              "allowed": np.array(0, np.float32), "masked": np.array(np.finfo(np.float32).min, np.float32)})
N("Shape", ["attention_mask"], ["mshape"]); N("Gather", ["mshape", "one"], ["total"])
N("Shape", ["input_ids"], ["ishape"]); N("Gather", ["ishape", "one"], ["seq"]); N("Sub", ["total", "seq"], ["past"])
causal_padding_bias("total", "attention_mask")
N("Gather", ["embed", "input_ids"], ["h0"])
h = "h0"
for i in range(L):
    p = f"layers.{i}."
    add_layer_weights(p)
    N("RMSNormalization", [h, p + "ln1"], [p + "x"], epsilon=1e-5)
    for nm in ("q", "k", "v"):
        N("MatMul", [p + "x", p + nm], [p + nm + "_"])
    N("RotaryEmbedding", [p + "q_", "cos", "sin", "position_ids"], [p + "qr"], num_heads=H)
    N("RotaryEmbedding", [p + "k_", "cos", "sin", "position_ids"], [p + "kr"], num_heads=KV)
    N("Attention", [p + "qr", p + "kr", p + "v_", "bias", f"past_key_values.{i}.key", f"past_key_values.{i}.value"],
      [p + "att", f"present.{i}.key", f"present.{i}.value"], q_num_heads=H, kv_num_heads=KV)
    h = attention_out_and_mlp(p, h, i, "RMSNormalization", {})
N("RMSNormalization", [h, "norm"], ["hf"], epsilon=1e-5); N("MatMul", ["hf", "lm_head"], ["logits"])
vi = lambda n, t, s: helper.make_tensor_value_info(n, t, s)
g_in = [vi("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]), vi("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
        vi("position_ids", TensorProto.INT64, ["batch_size", "sequence_length"])] + [
    vi(n, TensorProto.FLOAT, ["batch_size", KV, "past_sequence_length", HD]) for n in names_in[3:]]
g_out = [vi("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", V])] + [
    vi(n, TensorProto.FLOAT, ["batch_size", KV, "total_sequence_length", HD]) for n in names_out[1:]]
m23 = helper.make_model(helper.make_graph(nodes, "llama_opset23", g_in, g_out, [numpy_helper.from_array(v, k) for k, v in inits.items()]),
                        opset_imports=[helper.make_opsetid("", 23)], producer_name="tern/tools/make_llama_fixtures.py")
m23.ir_version = 10
onnx.save(m23, os.path.join(ops23, "model.onnx"))

# ---- int4 MatMulNBits variant of the torch export ----
int4 = os.path.join(OUT, "llama-gqa-int4")
write_configs(int4, "torch export with MatMulNBits int4, block 32")
m = onnx.load(os.path.join(torch_dir, "model.onnx"))
quantize_matmul_nbits(m, block=32)
onnx.save(m, os.path.join(int4, "model.onnx"))
# ---- onnxruntime-genai layout: packed QKV → GroupQueryAttention(do_rotary) ----
msft = os.path.join(OUT, "llama-gqa-msft")
write_configs(msft, "packed QKV MatMul → com.microsoft GroupQueryAttention with do_rotary")
inits = {"embed": W["embed.weight"], "cos": np.cos(t).astype(np.float32), "sin": np.sin(t).astype(np.float32),
         "norm": W["norm"], "lm_head": W["lm_head.weight"].T.copy(), "one": np.array(1, np.int64), "ax1": np.array([1], np.int64)}
nodes = []
N("ReduceSum", ["attention_mask", "ax1"], ["mask_sum"], keepdims=0); N("Sub", ["mask_sum", "one"], ["seqlens64"])
N("Cast", ["seqlens64"], ["seqlens_k"], to=TensorProto.INT32)
N("Shape", ["attention_mask"], ["mshape"]); N("Gather", ["mshape", "one"], ["total64"]); N("Cast", ["total64"], ["total_len"], to=TensorProto.INT32)
N("Gather", ["embed", "input_ids"], ["h0"])
h = "h0"
for i in range(L):
    p = f"layers.{i}."
    inits[p + "qkv"] = np.concatenate([W[p + nm + ".weight"].T for nm in ("q", "k", "v")], axis=1).copy()
    for nm in ("o", "gate", "up", "down"):
        inits[p + nm] = W[p + nm + ".weight"].T.copy()
    inits[p + "ln1"], inits[p + "ln2"] = W[p + "ln1"], W[p + "ln2"]
    N("SimplifiedLayerNormalization", [h, p + "ln1"], [p + "x"], epsilon=1e-5, axis=-1)
    N("MatMul", [p + "x", p + "qkv"], [p + "qkv_"])
    N("GroupQueryAttention", [p + "qkv_", "", "", f"past_key_values.{i}.key", f"past_key_values.{i}.value", "seqlens_k", "total_len", "cos", "sin"],
      [p + "att", f"present.{i}.key", f"present.{i}.value"], domain="com.microsoft", num_heads=H, kv_num_heads=KV, do_rotary=1)
    h = attention_out_and_mlp(p, h, i, "SimplifiedLayerNormalization", {"axis": -1})
N("SimplifiedLayerNormalization", [h, "norm"], ["hf"], epsilon=1e-5, axis=-1); N("MatMul", ["hf", "lm_head"], ["logits"])
mg = helper.make_model(helper.make_graph(nodes, "llama_gqa_msft", g_in[:2] + g_in[3:], g_out,
                                         [numpy_helper.from_array(v, k) for k, v in inits.items()]),
                       opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                       producer_name="tern/tools/make_llama_fixtures.py")
mg.ir_version = 8
onnx.save(mg, os.path.join(msft, "model.onnx"))

# ---- opset 24 static cache: TensorScatter into fixed-size buffers, Attention-24 with nonpad_kv_seqlen ----
st24 = os.path.join(OUT, "llama-gqa-static24")
write_configs(st24, "opset 24: fixed-size caches updated by TensorScatter, Attention with nonpad_kv_seqlen")
inits = {"embed": W["embed.weight"], "cos": np.cos(t).astype(np.float32), "sin": np.sin(t).astype(np.float32),
         "norm": W["norm"], "lm_head": W["lm_head.weight"].T.copy(), "one": np.array(1, np.int64), "zero": np.array(0, np.int64),
         "ax0": np.array([0], np.int64), "ax1": np.array([1], np.int64), "ax12": np.array([1, 2], np.int64),
         "capacity": np.array(MAXPOS, np.int64), "zeros3": np.zeros(3, np.int64),
         "q_heads": np.array([0, 0, H, HD], np.int64), "kv_heads": np.array([0, 0, KV, HD], np.int64), "merged": np.array([0, 0, D], np.int64),
         "allowed": np.array(0, np.float32), "masked": np.array(np.finfo(np.float32).min, np.float32)}
nodes = []
N("Shape", ["attention_mask"], ["mshape"]); N("Gather", ["mshape", "one"], ["total"]); N("Gather", ["mshape", "zero"], ["batch"])
N("Shape", ["input_ids"], ["ishape"]); N("Gather", ["ishape", "one"], ["seq"]); N("Sub", ["total", "seq"], ["past"])
N("Unsqueeze", ["batch", "ax0"], ["batch1"])
N("Expand", ["past", "batch1"], ["write_indices"]); N("Expand", ["total", "batch1"], ["nonpad_kv_seqlen"])
# the mask, zero-padded to the cache length: [B, capacity]
N("Sub", ["capacity", "total"], ["room"]); N("Unsqueeze", ["room", "ax0"], ["room1"])
N("Concat", ["zeros3", "room1"], ["pads"], axis=0); N("Pad", ["attention_mask", "pads"], ["mask_full"])
causal_padding_bias("capacity", "mask_full")
N("Gather", ["embed", "input_ids"], ["h0"])
h = "h0"
for i in range(L):
    p = f"layers.{i}."
    add_layer_weights(p)
    N("RMSNormalization", [h, p + "ln1"], [p + "x"], epsilon=1e-5)
    for nm, heads in (("q", "q_heads"), ("k", "kv_heads"), ("v", "kv_heads")):  # [B, heads, S, HD]
        N("MatMul", [p + "x", p + nm], [p + nm + "_"]); N("Reshape", [p + nm + "_", heads], [p + nm + "3"])
        N("Transpose", [p + nm + "3"], [p + nm + "4"], perm=[0, 2, 1, 3])
    N("RotaryEmbedding", [p + "q4", "cos", "sin", "position_ids"], [p + "qr"])
    N("RotaryEmbedding", [p + "k4", "cos", "sin", "position_ids"], [p + "kr"])
    N("TensorScatter", [f"past_key_values.{i}.key", p + "kr", "write_indices"], [f"present.{i}.key"], mode="circular")
    N("TensorScatter", [f"past_key_values.{i}.value", p + "v4", "write_indices"], [f"present.{i}.value"], mode="circular")
    N("Attention", [p + "qr", f"present.{i}.key", f"present.{i}.value", "bias", "", "", "nonpad_kv_seqlen"], [p + "att4"])
    N("Transpose", [p + "att4"], [p + "att3"], perm=[0, 2, 1, 3]); N("Reshape", [p + "att3", "merged"], [p + "att"])
    h = attention_out_and_mlp(p, h, i, "RMSNormalization", {})
N("RMSNormalization", [h, "norm"], ["hf"], epsilon=1e-5); N("MatMul", ["hf", "lm_head"], ["logits"])
cache_in = [vi(n, TensorProto.FLOAT, ["batch_size", KV, MAXPOS, HD]) for n in names_in[3:]]
cache_out = [vi(n, TensorProto.FLOAT, ["batch_size", KV, MAXPOS, HD]) for n in names_out[1:]]
m24 = helper.make_model(helper.make_graph(nodes, "llama_static_cache_opset24", g_in[:3] + cache_in, g_out[:1] + cache_out,
                                          [numpy_helper.from_array(v, k) for k, v in inits.items()]),
                        opset_imports=[helper.make_opsetid("", 24)], producer_name="tern/tools/make_llama_fixtures.py")
m24.ir_version = 11
onnx.save(m24, os.path.join(st24, "model.onnx"))

for d in (torch_dir, ops23, int4, msft, st24):
    print(d, os.path.getsize(os.path.join(d, "model.onnx")), "bytes")
