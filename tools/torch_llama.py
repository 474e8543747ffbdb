"""A plain PyTorch Llama (RMSNorm, rotate-half RoPE, grouped-query attention, SwiGLU) and its export in
the Optimum layout (input_ids, attention_mask, position_ids, past_key_values.N.key/value → logits,
present.N.key/value), shared by make_llama_fixtures.py and make_bench_model.py.

Needs Debian's python3-torch (1.13), python3-onnx, python3-numpy.
"""
import json
import os

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from llama_shapes import LlamaShape  # noqa: F401 (re-exported for the fixture makers)


class Llama(torch.nn.Module):
    def __init__(self, s: LlamaShape, weight_gain=1.0):
        super().__init__()
        self.s = s
        D, HD = s.hidden, s.head_dim
        self.embed = torch.nn.Embedding(s.vocab, D)
        self.layers = torch.nn.ModuleList()
        for _ in range(s.layers):
            m = torch.nn.Module()
            m.ln1, m.ln2 = torch.nn.Parameter(1 + 0.1 * torch.randn(D)), torch.nn.Parameter(1 + 0.1 * torch.randn(D))
            m.q, m.k = torch.nn.Linear(D, s.heads * HD, bias=False), torch.nn.Linear(D, s.kv_heads * HD, bias=False)
            m.v, m.o = torch.nn.Linear(D, s.kv_heads * HD, bias=False), torch.nn.Linear(s.heads * HD, D, bias=False)
            m.gate, m.up = torch.nn.Linear(D, s.ffn, bias=False), torch.nn.Linear(D, s.ffn, bias=False)
            m.down = torch.nn.Linear(s.ffn, D, bias=False)
            self.layers.append(m)
        self.norm = torch.nn.Parameter(1 + 0.1 * torch.randn(D))
        self.lm_head = None if s.tied else torch.nn.Linear(D, s.vocab, bias=False)
        self.register_buffer("inv_freq", 1.0 / (s.rope_theta ** (torch.arange(0, HD, 2).float() / HD)))
        if weight_gain != 1.0:
            with torch.no_grad():
                for p in self.parameters():
                    if p.dim() == 2:
                        p.mul_(weight_gain)

    @staticmethod
    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    @staticmethod
    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        s, HD = self.s, self.s.head_dim
        H, KV = s.heads, s.kv_heads
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
        h = self.rms(h, self.norm)
        logits = h @ self.embed.weight.T if self.lm_head is None else self.lm_head(h)
        return (logits, *presents)


def write_configs(d, s: LlamaShape, note, bos=1, eos=2):
    os.makedirs(d, exist_ok=True)
    json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": s.vocab, "hidden_size": s.hidden,
               "intermediate_size": s.ffn, "num_hidden_layers": s.layers, "num_attention_heads": s.heads,
               "num_key_value_heads": s.kv_heads, "max_position_embeddings": s.max_positions, "rms_norm_eps": 1e-5,
               "rope_theta": s.rope_theta, "tie_word_embeddings": s.tied, "bos_token_id": bos, "eos_token_id": eos,
               "_tern_fixture": note}, open(os.path.join(d, "config.json"), "w"), indent=1)


def export_optimum(model: Llama, path):
    """torch.onnx.export, opset 17, with the Optimum input/output names and dynamic axes."""
    s = model.s
    L, KV, HD = s.layers, s.kv_heads, s.head_dim
    names_in = ["input_ids", "attention_mask", "position_ids"] + [f"past_key_values.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
    names_out = ["logits"] + [f"present.{i}.{kv}" for i in range(L) for kv in ("key", "value")]
    dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"}, "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
           "position_ids": {0: "batch_size", 1: "sequence_length"}, "logits": {0: "batch_size", 1: "sequence_length"}}
    for n in names_in[3:]:
        dyn[n] = {0: "batch_size", 2: "past_sequence_length"}
    for n in names_out[1:]:
        dyn[n] = {0: "batch_size", 2: "total_sequence_length"}
    B, S, P = 2, 3, 2
    args = (torch.randint(0, s.vocab, (B, S)), torch.ones(B, P + S, dtype=torch.int64), torch.arange(P, P + S)[None].repeat(B, 1),
            *[torch.randn(B, KV, P, HD) for _ in range(2 * L)])
    # The TorchScript exporter writes what Optimum's exports of this era hold; torch >= 2.9 defaults to dynamo.
    legacy = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=names_in, output_names=names_out, dynamic_axes=dyn, opset_version=17,
                          do_constant_folding=True, **legacy)


def quantize_matmul_nbits(m: onnx.ModelProto, block=32):
    """Replaces every MatMul by a 2-D initializer with com.microsoft MatMulNBits (4 bits, `block`-wide
    blocks, asymmetric: per-block scale and zero point), in place."""
    init = {t.name: t for t in m.graph.initializer}
    new_nodes, dropped = [], set()
    for node in m.graph.node:
        w_name = node.input[1] if node.op_type == "MatMul" else None
        if w_name in init and len(init[w_name].dims) == 2 and w_name not in dropped:
            w = numpy_helper.to_array(init[w_name]).T  # [N, K]
            n_out, k_in = w.shape
            blocks = w.reshape(n_out, k_in // block, block)
            lo, hi = np.minimum(blocks.min(-1), 0), np.maximum(blocks.max(-1), 0)
            scale = np.maximum((hi - lo) / 15.0, 1e-8).astype(np.float32)
            zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
            q = np.clip(np.round(blocks / scale[..., None]) + zp[..., None], 0, 15).astype(np.uint8)
            packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
            zpp = zp if zp.shape[1] % 2 == 0 else np.concatenate([zp, np.zeros((n_out, 1), np.uint8)], 1)
            zpp = (zpp[:, 0::2] | (zpp[:, 1::2] << 4)).astype(np.uint8)
            m.graph.initializer.extend([numpy_helper.from_array(packed, w_name + "_q4"),
                                        numpy_helper.from_array(scale.reshape(-1), w_name + "_scales"),
                                        numpy_helper.from_array(zpp.reshape(-1), w_name + "_zp")])
            new_nodes.append(helper.make_node("MatMulNBits", [node.input[0], w_name + "_q4", w_name + "_scales", w_name + "_zp"],
                                              list(node.output), name=node.name + "_q4", domain="com.microsoft", K=k_in, N=n_out,
                                              bits=4, block_size=block))
            dropped.add(w_name)
        else:
            new_nodes.append(node)
    still_read = {i for n in new_nodes for i in n.input}
    keep = [t for t in m.graph.initializer if t.name in still_read]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    del m.graph.node[:]
    m.graph.node.extend(new_nodes)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
