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

Needs Debian's python3-torch, python3-onnx, python3-numpy:  /usr/bin/python3 tools/make_llama_fixtures.py
Then: node tools/ort/greedy_goldens.mjs for each folder (see tests/fixtures/README.md).
"""
import json
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

V, D, L, H, KV, F, MAXPOS = 320, 64, 2, 4, 2, 128, 128
HD = D // H
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
torch.manual_seed(0)


class Llama(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(V, D)
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            m = torch.nn.Module()
            m.ln1, m.ln2 = torch.nn.Parameter(1 + 0.1 * torch.randn(D)), torch.nn.Parameter(1 + 0.1 * torch.randn(D))
            m.q, m.k, m.v = torch.nn.Linear(D, H * HD, bias=False), torch.nn.Linear(D, KV * HD, bias=False), torch.nn.Linear(D, KV * HD, bias=False)
            m.o = torch.nn.Linear(H * HD, D, bias=False)
            m.gate, m.up, m.down = torch.nn.Linear(D, F, bias=False), torch.nn.Linear(D, F, bias=False), torch.nn.Linear(F, D, bias=False)
            self.layers.append(m)
        self.norm = torch.nn.Parameter(1 + 0.1 * torch.randn(D))
        self.lm_head = torch.nn.Linear(D, V, bias=False)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, HD, 2).float() / HD)))
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() == 2:
                    p.mul_(2.0)

    @staticmethod
    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    @staticmethod
    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        B, S = input_ids.shape
        h = self.embed(input_ids)
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # [B, 1, S, HD]
        T = attention_mask.shape[1]
        q_pos = torch.arange(S)[:, None] + (T - S)
        causal = torch.arange(T)[None, :] <= q_pos  # [S, T]
        allowed = causal[None, None] & attention_mask[:, None, None, :].bool()
        bias = torch.where(allowed, torch.tensor(0.0), torch.tensor(torch.finfo(torch.float32).min))
        presents = []
        for i, m in enumerate(self.layers):
            x = self.rms(h, m.ln1)
            q = m.q(x).view(B, S, H, HD).transpose(1, 2)
            k = m.k(x).view(B, S, KV, HD).transpose(1, 2)
            v = m.v(x).view(B, S, KV, HD).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            k = torch.cat([past[2 * i], k], dim=2)
            v = torch.cat([past[2 * i + 1], v], dim=2)
            presents += [k, v]
            kr = k[:, :, None].expand(B, KV, H // KV, k.shape[2], HD).reshape(B, H, k.shape[2], HD)
            vr = v[:, :, None].expand(B, KV, H // KV, v.shape[2], HD).reshape(B, H, v.shape[2], HD)
            att = torch.softmax(q @ kr.transpose(-1, -2) / (HD ** 0.5) + bias, dim=-1) @ vr
            h = h + m.o(att.transpose(1, 2).reshape(B, S, H * HD))
            x = self.rms(h, m.ln2)
            g = m.gate(x)
            h = h + m.down(g * torch.sigmoid(g) * m.up(x))
        return (self.lm_head(self.rms(h, self.norm)), *presents)


def write_configs(d, dtype_note):
    os.makedirs(d, exist_ok=True)
    json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V, "hidden_size": D,
               "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": KV,
               "max_position_embeddings": MAXPOS, "rms_norm_eps": 1e-5, "bos_token_id": 1, "eos_token_id": 2,
               "_tern_fixture": dtype_note}, open(os.path.join(d, "config.json"), "w"), indent=1)


model = Llama().eval()
names_in = ["input_ids", "attention_mask", "position_ids"] + [f"past_key_values.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
names_out = ["logits"] + [f"present.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"}, "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
       "position_ids": {0: "batch_size", 1: "sequence_length"}, "logits": {0: "batch_size", 1: "sequence_length"}}
for n in names_in[3:]:
    dyn[n] = {0: "batch_size", 2: "past_sequence_length"}
for n in names_out[1:]:
    dyn[n] = {0: "batch_size", 2: "total_sequence_length"}
B, S, P = 2, 3, 2
args = (torch.randint(0, V, (B, S)), torch.ones(B, P + S, dtype=torch.int64), torch.arange(P, P + S)[None].repeat(B, 1),
        *[torch.randn(B, KV, P, HD) for _ in range(2 * L)])
torch_dir = os.path.join(OUT, "llama-gqa-torch")
write_configs(torch_dir, "torch.onnx.export, opset 17")
torch.onnx.export(model, args, os.path.join(torch_dir, "model.onnx"), input_names=names_in, output_names=names_out,
                  dynamic_axes=dyn, opset_version=17, do_constant_folding=True)
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
N("Range", ["past", "total", "one"], ["rows"]); N("Range", ["zero", "total", "one"], ["cols"])
N("Unsqueeze", ["cols", "ax0"], ["cols2"]); N("Unsqueeze", ["rows", "ax1"], ["rows2"]); N("LessOrEqual", ["cols2", "rows2"], ["causal"])
N("Cast", ["attention_mask"], ["keep"], to=TensorProto.BOOL); N("Unsqueeze", ["keep", "ax12"], ["keep4"])
N("And", ["causal", "keep4"], ["ok"]); N("Where", ["ok", "allowed", "masked"], ["bias"])
N("Gather", ["embed", "input_ids"], ["h0"])
h = "h0"
for i in range(L):
    p = f"layers.{i}."
    for nm in ("q", "k", "v", "o", "gate", "up", "down"):
        inits[p + nm] = W[p + nm + ".weight"].T.copy()
    inits[p + "ln1"], inits[p + "ln2"] = W[p + "ln1"], W[p + "ln2"]
    N("RMSNormalization", [h, p + "ln1"], [p + "x"], epsilon=1e-5)
    for nm in ("q", "k", "v"):
        N("MatMul", [p + "x", p + nm], [p + nm + "_"])
    N("RotaryEmbedding", [p + "q_", "cos", "sin", "position_ids"], [p + "qr"], num_heads=H)
    N("RotaryEmbedding", [p + "k_", "cos", "sin", "position_ids"], [p + "kr"], num_heads=KV)
    N("Attention", [p + "qr", p + "kr", p + "v_", "bias", f"past_key_values.{i}.key", f"past_key_values.{i}.value"],
      [p + "att", f"present.{i}.key", f"present.{i}.value"], q_num_heads=H, kv_num_heads=KV)
    N("MatMul", [p + "att", p + "o"], [p + "o_"]); N("Add", [h, p + "o_"], [p + "h1"])
    N("RMSNormalization", [p + "h1", p + "ln2"], [p + "x2"], epsilon=1e-5)
    N("MatMul", [p + "x2", p + "gate"], [p + "g"]); N("MatMul", [p + "x2", p + "up"], [p + "u"])
    N("Sigmoid", [p + "g"], [p + "sg"]); N("Mul", [p + "g", p + "sg"], [p + "silu"]); N("Mul", [p + "silu", p + "u"], [p + "gu"])
    N("MatMul", [p + "gu", p + "down"], [p + "d"]); h = f"h{i + 1}"; N("Add", [p + "h1", p + "d"], [h])
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
init = {t.name: t for t in m.graph.initializer}
BLOCK = 32
new_nodes = []
for node in m.graph.node:
    if node.op_type == "MatMul" and node.input[1] in init and len(init[node.input[1]].dims) == 2:
        w = numpy_helper.to_array(init[node.input[1]]).T  # [N, K]
        n_out, k_in = w.shape
        blocks = w.reshape(n_out, k_in // BLOCK, BLOCK)
        lo, hi = np.minimum(blocks.min(-1), 0), np.maximum(blocks.max(-1), 0)
        scale = np.maximum((hi - lo) / 15.0, 1e-8).astype(np.float32)
        zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
        q = np.clip(np.round(blocks / scale[..., None]) + zp[..., None], 0, 15).astype(np.uint8)
        packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
        zpp = zp if zp.shape[1] % 2 == 0 else np.concatenate([zp, np.zeros((n_out, 1), np.uint8)], 1)
        zpp = (zpp[:, 0::2] | (zpp[:, 1::2] << 4)).astype(np.uint8)
        base = node.input[1]
        m.graph.initializer.extend([numpy_helper.from_array(packed, base + "_q4"), numpy_helper.from_array(scale.reshape(-1), base + "_scales"),
                                    numpy_helper.from_array(zpp.reshape(-1), base + "_zp")])
        new_nodes.append(helper.make_node("MatMulNBits", [node.input[0], base + "_q4", base + "_scales", base + "_zp"], list(node.output),
                                          name=node.name + "_q4", domain="com.microsoft", K=k_in, N=n_out, bits=4, block_size=BLOCK))
        init.pop(base)
    else:
        new_nodes.append(node)
keep = [t for t in m.graph.initializer if t.name in init or t.name.endswith(("_q4", "_scales", "_zp"))]
del m.graph.initializer[:]
m.graph.initializer.extend(keep)
del m.graph.node[:]
m.graph.node.extend(new_nodes)
m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
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
    N("MatMul", [p + "att", p + "o"], [p + "o_"]); N("Add", [h, p + "o_"], [p + "h1"])
    N("SimplifiedLayerNormalization", [p + "h1", p + "ln2"], [p + "x2"], epsilon=1e-5, axis=-1)
    N("MatMul", [p + "x2", p + "gate"], [p + "g"]); N("MatMul", [p + "x2", p + "up"], [p + "u"])
    N("Sigmoid", [p + "g"], [p + "sg"]); N("Mul", [p + "g", p + "sg"], [p + "silu"]); N("Mul", [p + "silu", p + "u"], [p + "gu"])
    N("MatMul", [p + "gu", p + "down"], [p + "d"]); h = f"h{i + 1}"; N("Add", [p + "h1", p + "d"], [h])
N("SimplifiedLayerNormalization", [h, "norm"], ["hf"], epsilon=1e-5, axis=-1); N("MatMul", ["hf", "lm_head"], ["logits"])
mg = helper.make_model(helper.make_graph(nodes, "llama_gqa_msft", g_in[:2] + g_in[3:], g_out,
                                         [numpy_helper.from_array(v, k) for k, v in inits.items()]),
                       opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                       producer_name="tern/tools/make_llama_fixtures.py")
mg.ir_version = 8
onnx.save(mg, os.path.join(msft, "model.onnx"))

for d in (torch_dir, ops23, int4, msft):
    print(d, os.path.getsize(os.path.join(d, "model.onnx")), "bytes")
