#!/usr/bin/env python3
"""Writes tests/contrib_cases/<case>/model.onnx and test_data_set_0/input_<i>.pb for ONNX Runtime's
com.microsoft ops that the ONNX node tests do not cover (GroupQueryAttention, MatMulNBits, FusedMatMul…).
Outputs come from ONNX Runtime itself: run `node tools/ort/run_cases.mjs tests/contrib_cases` next.

Needs Debian's python3-onnx and python3-numpy:  /usr/bin/python3 tools/make_contrib_cases.py
"""
import os
import shutil

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(__file__), "..", "tests", "contrib_cases")
rng = np.random.default_rng(7)
F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16


def write_case(name, node, inputs, outputs, inits=()):
    """inputs: list of (name, array); outputs: list of (name, elem_type); inits: (name, array or TensorProto)."""
    d = os.path.join(ROOT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    np_to_onnx = {np.float32: F32, np.float16: F16, np.int32: TensorProto.INT32, np.int64: TensorProto.INT64,
                  np.uint8: TensorProto.UINT8}
    g_inputs = [helper.make_tensor_value_info(n, np_to_onnx[a.dtype.type], list(a.shape)) for n, a in inputs]
    g_outputs = [helper.make_tensor_value_info(n, t, None) for n, t in outputs]
    graph = helper.make_graph([node], name, g_inputs, g_outputs, [a if isinstance(a, TensorProto) else numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
                              producer_name="tern/tools/make_contrib_cases.py")
    model.ir_version = 10
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for i, (n, a) in enumerate(inputs):
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())


def gqa(name, B, S, P, Hq, Hkv, D, seqlens, packed=False, rotary=False, interleaved=0, window=-1, softcap=0.0,
        dtype=np.float32, scale=None):
    total = max(seqlens) + 1
    attrs = dict(num_heads=Hq, kv_num_heads=Hkv)
    if rotary:
        attrs.update(do_rotary=1, rotary_interleaved=interleaved)
    if window > 0:
        attrs["local_window_size"] = window
    if softcap:
        attrs["softcap"] = softcap
    if scale:
        attrs["scale"] = scale
    inputs = []
    if packed:
        inputs.append(("query", rng.standard_normal((B, S, (Hq + 2 * Hkv) * D)).astype(dtype)))
        names = ["query", "", ""]
    else:
        inputs += [("query", rng.standard_normal((B, S, Hq * D)).astype(dtype)),
                   ("key", rng.standard_normal((B, S, Hkv * D)).astype(dtype)),
                   ("value", rng.standard_normal((B, S, Hkv * D)).astype(dtype))]
        names = ["query", "key", "value"]
    if P > 0:
        inputs += [("past_key", rng.standard_normal((B, Hkv, P, D)).astype(dtype)),
                   ("past_value", rng.standard_normal((B, Hkv, P, D)).astype(dtype))]
        names += ["past_key", "past_value"]
    else:
        names += ["", ""]
    inputs += [("seqlens_k", np.array(seqlens, dtype=np.int32)), ("total_sequence_length", np.array(total, dtype=np.int32))]
    names += ["seqlens_k", "total_sequence_length"]
    if rotary:
        t = np.arange(64)[:, None] * (1.0 / 10000 ** (np.arange(0, D, 2) / D))[None]
        inputs += [("cos_cache", np.cos(t).astype(dtype)), ("sin_cache", np.sin(t).astype(dtype))]
        names += ["cos_cache", "sin_cache"]
    node = helper.make_node("GroupQueryAttention", names, ["output", "present_key", "present_value"], domain="com.microsoft", **attrs)
    t = F16 if dtype == np.float16 else F32
    write_case(name, node, inputs, [("output", t), ("present_key", t), ("present_value", t)])


def nbits(name, M, K, N, bits, block, zero_points=None, bias=False, dtype=np.float32, accuracy_level=0, g_idx=False):
    k_blocks = (K + block - 1) // block
    q = rng.integers(0, 2 ** bits, size=(N, k_blocks * block)).astype(np.uint8)
    if bits == 4:
        packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)
    elif bits == 2:
        packed = (q[:, 0::4] | (q[:, 1::4] << 2) | (q[:, 2::4] << 4) | (q[:, 3::4] << 6)).astype(np.uint8)
    else:
        packed = q
    packed = packed.reshape(N, k_blocks, block * bits // 8)
    scales = (rng.random((N * k_blocks)) * 0.1 + 0.01).astype(dtype)
    inputs = [("A", rng.standard_normal(M + [K]).astype(dtype)), ("B", packed), ("scales", scales)]
    names = ["A", "B", "scales"]
    if zero_points == "packed":
        z = rng.integers(0, 2 ** bits, size=(N, k_blocks)).astype(np.uint8)
        if bits == 4:
            if k_blocks % 2:
                z = np.concatenate([z, np.zeros((N, 1), np.uint8)], axis=1)
            z = (z[:, 0::2] | (z[:, 1::2] << 4)).astype(np.uint8)
        elif bits == 2:
            z = np.concatenate([z, np.zeros((N, -k_blocks % 4), np.uint8)], axis=1)
            z = (z[:, 0::4] | (z[:, 1::4] << 2) | (z[:, 2::4] << 4) | (z[:, 3::4] << 6)).astype(np.uint8)
        inputs.append(("zero_points", z.reshape(-1)))
        names.append("zero_points")
    elif zero_points == "float":
        inputs.append(("zero_points", (rng.random(N * k_blocks) * (2 ** bits - 1)).astype(dtype)))
        names.append("zero_points")
    if g_idx:  # act-order: each block's block_size columns scattered over K (ONNX Runtime ignores zero points then)
        while len(names) < 4:
            names.append("")
        inputs.append(("g_idx", (rng.permutation(K) // block).astype(np.int32)))
        names.append("g_idx")
    if bias:
        while len(names) < 5:
            names.append("")
        inputs.append(("bias", rng.standard_normal(N).astype(dtype)))
        names.append("bias")
    attrs = dict(accuracy_level=accuracy_level) if accuracy_level else {}
    node = helper.make_node("MatMulNBits", names, ["Y"], domain="com.microsoft", K=K, N=N, bits=bits, block_size=block, **attrs)
    # ORT quantizes activations only for weights it can prepack: constant ones (fed as inputs it stays fp32).
    # (tern reads g_idx only as an initializer: it sorts B's columns once, at load.)
    constant = accuracy_level or g_idx
    inits = inputs[1:] if constant else []
    write_case(name, node, inputs[:1] if constant else inputs, [("Y", F16 if dtype == np.float16 else F32)], inits)


def simple(name, op, inputs, n_out, out_types=None, domain="com.microsoft", **attrs):
    """One node over random inputs; outputs typed float32 unless given."""
    names = [n for n, _ in inputs]
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, domain=domain, **attrs)
    write_case(name, node, inputs, [(o, (out_types or [F32] * n_out)[i]) for i, o in enumerate(outs)])


x = rng.standard_normal((2, 3, 16)).astype(np.float32)
b16 = rng.standard_normal(16).astype(np.float32)
simple("fastgelu_bias", "FastGelu", [("X", x), ("bias", b16)], 1)
simple("fastgelu_nobias", "FastGelu", [("X", x)], 1)
simple("biasgelu", "BiasGelu", [("A", x), ("B", b16)], 1)
simple("gelu_ms", "Gelu", [("X", x)], 1)
simple("quickgelu", "QuickGelu", [("X", x)], 1, alpha=1.5)
gamma, beta = (1 + 0.1 * rng.standard_normal(16)).astype(np.float32), (0.1 * rng.standard_normal(16)).astype(np.float32)
skip = rng.standard_normal((2, 3, 16)).astype(np.float32)
simple("skiplayernorm_bias_sum", "SkipLayerNormalization",
       [("input", x), ("skip", skip), ("gamma", gamma), ("beta", beta), ("bias", b16)], 4, epsilon=1e-5)
simple("skipsimplifiedlayernorm_bias_sum", "SkipSimplifiedLayerNormalization",
       [("input", x), ("skip", skip), ("gamma", gamma), ("bias", b16)], 4, epsilon=1e-6)
# ONNX Runtime registers SimplifiedLayerNormalization in the default domain (as its model builder emits it).
simple("simplifiedlayernorm", "SimplifiedLayerNormalization", [("X", x), ("scale", gamma)], 1, domain="", epsilon=1e-6)
gqa("gqa_prompt", B=2, S=5, P=0, Hq=4, Hkv=2, D=8, seqlens=[4, 4])
gqa("gqa_decode_past", B=2, S=1, P=6, Hq=4, Hkv=2, D=8, seqlens=[6, 6])
gqa("gqa_decode_ragged", B=2, S=1, P=6, Hq=4, Hkv=1, D=8, seqlens=[6, 3])
gqa("gqa_packed_rotary", B=1, S=6, P=0, Hq=4, Hkv=2, D=16, seqlens=[5], packed=True, rotary=True)
gqa("gqa_rotary_decode_interleaved", B=1, S=1, P=7, Hq=2, Hkv=2, D=16, seqlens=[7], rotary=True, interleaved=1)
gqa("gqa_local_window", B=1, S=8, P=0, Hq=2, Hkv=1, D=8, seqlens=[7], window=3)
gqa("gqa_softcap_scale", B=1, S=4, P=3, Hq=2, Hkv=2, D=8, seqlens=[6], softcap=2.0, scale=0.9)
gqa("gqa_fp16", B=1, S=3, P=2, Hq=4, Hkv=2, D=8, seqlens=[4], dtype=np.float16)
nbits("matmulnbits_4b_bs32_zp_bias", [2, 3], 64, 16, 4, 32, zero_points="packed", bias=True)
nbits("matmulnbits_4b_bs16_nozp", [3], 48, 8, 4, 16)
nbits("matmulnbits_4b_bs32_odd_blocks", [2], 96, 8, 4, 32, zero_points="packed")
nbits("matmulnbits_4b_bs128_float_zp", [1, 2], 256, 8, 4, 128, zero_points="float")
nbits("matmulnbits_8b_bs64_zp", [2], 128, 8, 8, 64, zero_points="packed")
nbits("matmulnbits_4b_bs256", [1], 512, 4, 4, 256)
nbits("matmulnbits_4b_fp16", [2, 2], 64, 8, 4, 32, zero_points="packed", dtype=np.float16)
# accuracy_level 4: ORT quantizes the activations to int8 per block; tern's decode rows (M <= 4) do too.
nbits("matmulnbits_4b_bs32_zp_int8_activations", [1], 256, 40, 4, 32, zero_points="packed", accuracy_level=4)
nbits("matmulnbits_4b_bs64_int8_activations", [3], 320, 24, 4, 64, accuracy_level=4)
nbits("matmulnbits_8b_bs32_int8_activations", [2], 192, 20, 8, 32, accuracy_level=4)
def gbq(name, rows, cols, bits, block, ids, zero_points=False, dtype=np.float32, lines=None):
    """GatherBlockQuantized over a [rows, (lines,) cols] table packed as MatMulNBits packs (4-bit pairs low nibble
    first), gather_axis 0, quantize_axis the last."""
    shape = [rows] + ([lines] if lines else [])
    q = rng.integers(0, 2 ** bits, size=shape + [cols]).astype(np.uint8)
    data = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8) if bits == 4 else q
    blocks = (cols + block - 1) // block
    scales = (rng.random(shape + [blocks]) * 0.1 + 0.01).astype(dtype)
    inits = [("data", data), ("scales", scales)]
    names = ["data", "indices", "scales"]
    if zero_points:
        z = rng.integers(0, 2 ** bits, size=shape + [blocks + (blocks % 2 if bits == 4 else 0)]).astype(np.uint8)
        inits.append(("zero_points", (z[..., 0::2] | (z[..., 1::2] << 4)).astype(np.uint8) if bits == 4 else z))
        names.append("zero_points")
    node = helper.make_node("GatherBlockQuantized", names, ["Y"], domain="com.microsoft", bits=bits, block_size=block,
                            gather_axis=0, quantize_axis=len(shape))
    write_case(name, node, [("indices", np.array(ids, np.int64))], [("Y", F16 if dtype == np.float16 else F32)], inits)


# FusedMatMul: what fuse_kv_matmuls makes of Q·Kᵀ (transB, alpha) and P·V over grouped heads (batch broadcast).
simple("fusedmatmul_transb_alpha", "FusedMatMul", [("A", rng.standard_normal((2, 3, 4, 8)).astype(np.float32)),
       ("B", rng.standard_normal((2, 3, 5, 8)).astype(np.float32))], 1, transB=1, alpha=0.35)
simple("fusedmatmul_transa_broadcast", "FusedMatMul", [("A", rng.standard_normal((2, 1, 8, 4)).astype(np.float32)),
       ("B", rng.standard_normal((3, 8, 5)).astype(np.float32))], 1, transA=1, alpha=-1.5)
# (last: the cases above keep the random draws they were made with)
# GatherBlockQuantized: the genai builder's shared int4 embedding (uint8 data, default zero point 8), 8-bit,
# packed zero points, fp16 scales, a 3-D table, negative indices.
gbq("gatherblockquantized_4b_bs32", 16, 64, 4, 32, [[3, 0, 15]])
gbq("gatherblockquantized_4b_bs16_zp_negative", 8, 48, 4, 16, [-1, 2, -8], zero_points=True)
gbq("gatherblockquantized_8b_bs32_zp", 6, 64, 8, 32, [5, 1], zero_points=True)
gbq("gatherblockquantized_4b_fp16_3d", 5, 32, 4, 16, [[4], [0]], dtype=np.float16, lines=2)


def gbq_4bit_type(name, rows, cols, block, ids, signed, zero_points=False):
    """GatherBlockQuantized as ONNX Runtime's MatMulNBitsQuantizer writes an embedding's Gather: int4/uint4 data
    (the ONNX types' packing, two values a byte over the whole tensor), zero points of the same type, default 0."""
    lo, hi, t = (-8, 8, TensorProto.INT4) if signed else (0, 16, TensorProto.UINT4)
    blocks = (cols + block - 1) // block
    inits = [("data", helper.make_tensor("data", t, [rows, cols], rng.integers(lo, hi, size=rows * cols).tolist())),
             ("scales", (rng.random((rows, blocks)) * 0.1 + 0.01).astype(np.float32))]
    names = ["data", "indices", "scales"]
    if zero_points:
        inits.append(("zero_points", helper.make_tensor("zero_points", t, [rows, blocks], rng.integers(lo, hi, size=rows * blocks).tolist())))
        names.append("zero_points")
    node = helper.make_node("GatherBlockQuantized", names, ["Y"], domain="com.microsoft", block_size=block, gather_axis=0, quantize_axis=1)
    write_case(name, node, [("indices", np.array(ids, np.int64))], [("Y", F32)], inits)


# ONNX Runtime's quantizer: uint4 with zero points over rows of 33 values (rows start mid-byte), int4 without.
gbq_4bit_type("gatherblockquantized_uint4_zp_odd_rows", 7, 33, 16, [6, 1, 0, 3], signed=False, zero_points=True)
gbq_4bit_type("gatherblockquantized_int4_bs32", 9, 64, 32, [[8, 2], [-1, 0]], signed=True)
# 2-bit codes (four a byte, low first; default zero point 2): decode rows on the GEMV (blocks of 32·j), a
# prefill and blocks of 16 on the panel GEMM.
nbits("matmulnbits_2b_bs32_nozp", [1], 128, 12, 2, 32)
nbits("matmulnbits_2b_bs32_odd_blocks_zp", [2], 96, 9, 2, 32, zero_points="packed")
nbits("matmulnbits_2b_bs64_zp_bias_prefill", [2, 5], 192, 8, 2, 64, zero_points="packed", bias=True)
nbits("matmulnbits_2b_bs16_float_zp", [3], 48, 8, 2, 16, zero_points="float")
# g_idx (act-order, deprecated in ONNX Runtime's spec): decode rows on the GEMV, prefill rows on the GEMM (ONNX
# Runtime takes 2 and 4 bits there).
nbits("matmulnbits_4b_bs32_g_idx", [1], 128, 12, 4, 32, g_idx=True)
nbits("matmulnbits_4b_bs32_g_idx_prefill", [2, 4], 128, 8, 4, 32, g_idx=True)
nbits("matmulnbits_4b_bs16_g_idx", [2], 64, 8, 4, 16, g_idx=True)


def integer_product(name, op, rows, K, N, b_signed, per_column, bias=False):
    """MatMulIntegerToFloat (uint8 A with its scale and zero point) or DynamicQuantizeMatMul (float A): B [K, N]
    an int8/uint8 constant with a scale and zero point per tensor or per column, as onnxruntime.quantization's
    dynamic IntegerOps quantize a MatMul's weight. Signed weights stay in [−64, 64): on x86 without VNNI ONNX Runtime
    sums uint8 × int8 pairs in int16 (vpmaddubsw), which saturates past that, and the case is ONNX's exact sum."""
    lo, hi, t = (-64, 64, np.int8) if b_signed else (0, 256, np.uint8)
    cols = [N] if per_column else []
    inits = [("B", rng.integers(lo, hi, size=(K, N)).astype(t))]
    b_scale = (rng.random(cols) * 0.02 + 0.005).astype(np.float32)
    b_zp = rng.integers(lo // 4 if b_signed else 100, hi // 4 if b_signed else 156, size=cols).astype(t)
    if op == "DynamicQuantizeMatMul":
        inputs = [("A", rng.standard_normal(rows + [K]).astype(np.float32))]
        names = ["A", "B", "b_scale", "b_zero_point"]
    else:
        inputs = [("A", rng.integers(0, 256, size=rows + [K]).astype(np.uint8))]
        inits += [("a_scale", np.array(0.031, np.float32)), ("a_zero_point", np.array(131, np.uint8))]
        names = ["A", "B", "a_scale", "b_scale", "a_zero_point", "b_zero_point"]
    inits += [("b_scale", b_scale), ("b_zero_point", b_zp)]
    if bias:
        inits.append(("bias", rng.standard_normal(N).astype(np.float32)))
        names.append("bias")
    write_case(name, helper.make_node(op, names, ["Y"], domain="com.microsoft"), inputs, [("Y", F32)], inits)


# The integer products ONNX Runtime fuses dynamically quantized MatMuls into (transformers.js's model_quantized.onnx).
integer_product("matmulintegertofloat_s8_per_column_bias", "MatMulIntegerToFloat", [2, 3], 40, 12, True, True, bias=True)
integer_product("matmulintegertofloat_u8_per_tensor", "MatMulIntegerToFloat", [5], 24, 8, False, False)
integer_product("dynamicquantizematmul_s8_per_tensor", "DynamicQuantizeMatMul", [1, 3], 64, 16, True, False)
integer_product("dynamicquantizematmul_u8_per_column_bias", "DynamicQuantizeMatMul", [4], 48, 8, False, True, bias=True)


def bnb4(name, rows, K, N, block, quant_type):
    """MatMulBnb4 as MatMulBnb4Quantizer writes it (transformers.js's model_bnb4): Wᵀ's N·K codes two a byte, first
    in the high nibble, one absmax per block of the flat run."""
    numel = N * K
    inits = [("B", rng.integers(0, 256, size=(numel + 1) // 2).astype(np.uint8)),
             ("absmax", (rng.random((numel + block - 1) // block) * 0.5 + 0.05).astype(np.float32))]
    node = helper.make_node("MatMulBnb4", ["A", "B", "absmax"], ["Y"], domain="com.microsoft", K=K, N=N, block_size=block,
                            quant_type=quant_type)
    write_case(name, node, [("A", rng.standard_normal(rows + [K]).astype(np.float32))], [("Y", F32)], inits)


# MatMulBnb4: NF4 in blocks of 64 (the quantizer's default) for a decode row and a prefill, FP4 over an odd N·K.
bnb4("matmulbnb4_nf4_bs64_decode", [1], 128, 24, 64, 1)
bnb4("matmulbnb4_nf4_bs64_prefill", [2, 5], 96, 16, 64, 1)
bnb4("matmulbnb4_fp4_bs32_odd", [3], 33, 5, 32, 0)
print("wrote", ROOT)
