#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/) and the hostile-input regression files
(tests/bad_inputs/<target>/ and tests/bad_inputs/expected.txt) — every file here is made by this script, from
the formats' specs, with Debian's python3-onnx and python3-numpy only:

  python3 tests/fuzz/make_corpus.py

The weight_pack seed is the one file it cannot make: `tern pack tests/fuzz/pack_model OUT` writes it.
Reproducers the fuzzers find are kept in REPRODUCERS below, so a rerun keeps them and their expected errors.
"""
import glob
import json
import os
import shutil
import struct

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
BAD = os.path.join(ROOT, "tests", "bad_inputs")
PACK_VERSION = 3  # src/graph/weight_pack.cpp kFormatVersion: a pack of another version is refused before its header is read


def model_bytes(nodes, inputs, outputs, inits=(), opset=21, value_info=(), ir=10, domains=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(g, opset_imports=ops, ir_version=ir)
    return m.SerializeToString()


def vi(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


F, I64 = TensorProto.FLOAT, TensorProto.INT64


def external(name, dims, location, offset=None, length=None, dtype=F):
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return t


def raw(name, dtype, dims, data):
    """A TensorProto with raw_data, however its type and dims disagree with the bytes."""
    t = TensorProto()
    t.name, t.data_type, t.raw_data = name, dtype, data
    t.dims.extend(dims)
    return t


def ext_model(t):
    return model_bytes([helper.make_node("Identity", [t.name], ["y"])], [], [vi("y", t.data_type, None)], [t])


# --- seeds -------------------------------------------------------------------------------------------------
def onnx_seeds():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    yield "matmul_add.onnx", model_bytes(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
        [vi("x", F, ["batch", 8])], [vi("y", F, None)], [w, b])
    table = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "table")
    shape = numpy_helper.from_array(np.array([0, -1, 2, 4], np.int64), "shape")
    yield "gather_reshape_softmax.onnx", model_bytes(
        [helper.make_node("Gather", ["table", "ids"], ["e"]), helper.make_node("Reshape", ["e", "shape"], ["r"]),
         helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
        [vi("ids", I64, [1, "seq"])], [vi("y", F, None)], [table, shape])
    scale = numpy_helper.from_array(np.ones(8, np.float32), "scale")
    yield "norm_rope_attention.onnx", model_bytes(
        [helper.make_node("RMSNormalization", ["x", "scale"], ["n"], axis=-1, epsilon=1e-5),
         helper.make_node("MatMul", ["n", "w"], ["q"]),
         helper.make_node("Attention", ["q", "q", "q"], ["y"], q_num_heads=2, kv_num_heads=2)],
        [vi("x", F, [1, "seq", 8])], [vi("y", F, None)], [scale, w], opset=23)
    yield "constant_of_shape_range.onnx", model_bytes(
        [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("ConstantOfShape", ["s"], ["c"]),
         helper.make_node("CumSum", ["c", "axis"], ["y"])],
        [vi("x", F, [2, "n"])], [vi("y", F, None)], [numpy_helper.from_array(np.array(1, np.int64), "axis")])
    yield "external_weights.onnx", ext_model(external("w", [4, 4], "weights.bin", 0, 64))
    yield "if_subgraph.onnx", model_bytes(
        [helper.make_node("If", ["cond"], ["y"],
                          then_branch=helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [vi("t", F, None)]),
                          else_branch=helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", F, None)]))],
        [vi("cond", TensorProto.BOOL, []), vi("x", F, [3])], [vi("y", F, None)])


class U32(int):
    """A GGUF uint32 value (plain ints are written as int32)."""


def gguf_bytes(tensors, kvs, version=3, alignment=32):
    """A GGUF file as llama.cpp's gguf.cpp lays it out: header, key/values, tensor infos, aligned data."""
    def s(x):
        x = x.encode()
        return struct.pack("<Q", len(x)) + x

    def value(v):
        if isinstance(v, bool):
            return struct.pack("<IB", 7, v)
        if isinstance(v, U32):
            return struct.pack("<II", 4, v)
        if isinstance(v, int):
            return struct.pack("<Ii", 5, v)
        if isinstance(v, float):
            return struct.pack("<If", 6, v)
        if isinstance(v, str):
            return struct.pack("<I", 8) + s(v)
        if isinstance(v, list):  # of strings
            return struct.pack("<IIQ", 9, 8, len(v)) + b"".join(s(x) for x in v)
        raise TypeError(v)

    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, v in kvs.items():
        out += s(k) + value(v)
    data, infos = b"", b""
    for name, dims, gtype, raw in tensors:
        data += b"\0" * (-len(data) % alignment)
        infos += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", gtype, len(data))
        data += raw
    out += infos
    out += b"\0" * (-len(out) % alignment)
    return out + data


def q8_0(a):
    """ggml Q8_0 blocks of 32: fp16 scale, 32 int8."""
    a = a.reshape(-1, 32)
    out = b""
    for row in a:
        d = float(np.abs(row).max()) / 127 or 1.0
        out += np.float16(d).tobytes() + np.round(row / d).astype(np.int8).tobytes()
    return out


def llama_gguf(quantized=False, extra_tensors=(), **overrides):
    rng = np.random.default_rng(1)
    hidden, ffn, vocab = 32, 32, 16
    kvs = {"general.architecture": "llama", "llama.block_count": 1, "llama.embedding_length": hidden,
           "llama.feed_forward_length": ffn, "llama.attention.head_count": 2, "llama.attention.head_count_kv": 2,
           "llama.attention.layer_norm_rms_epsilon": 1e-5, "llama.context_length": 32,
           "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": [chr(ord("a") + i) for i in range(vocab)],
           "tokenizer.ggml.merges": ["a b"]}
    kvs.update(overrides)

    def mat(name, k, n):
        a = rng.standard_normal((n, k)).astype(np.float32)
        return (name, [k, n], 8, q8_0(a)) if quantized else (name, [k, n], 0, a.tobytes())

    def vec(name, n):
        return (name, [n], 0, np.ones(n, np.float32).tobytes())

    tensors = [("token_embd.weight", [hidden, vocab], 0, rng.standard_normal((vocab, hidden)).astype(np.float32).tobytes()),
               vec("blk.0.attn_norm.weight", hidden), vec("blk.0.ffn_norm.weight", hidden),
               mat("blk.0.attn_q.weight", hidden, hidden), mat("blk.0.attn_k.weight", hidden, hidden),
               mat("blk.0.attn_v.weight", hidden, hidden), mat("blk.0.attn_output.weight", hidden, hidden),
               mat("blk.0.ffn_gate.weight", hidden, ffn), mat("blk.0.ffn_up.weight", hidden, ffn),
               mat("blk.0.ffn_down.weight", ffn, hidden), vec("output_norm.weight", hidden), *extra_tensors]
    return gguf_bytes(tensors, kvs)


def llama2c_bytes(dim=8, hidden=16, layers=1, heads=2, kv_heads=2, vocab=32, seq=16, floats=None):
    head = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq)
    hs = dim // heads
    n = (vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * dim * (dim // heads * kv_heads) + 3 * dim * hidden)
         + dim + seq * hs)  # embedding, per layer norms and matrices, final norm, freq_cis (real + imag)
    if floats is None:
        floats = n
    return head + np.random.default_rng(2).standard_normal(floats).astype(np.float32).tobytes()


def llama2c_tokenizer_bytes(pieces):
    out = struct.pack("<i", max(len(p) for p in pieces))
    for i, p in enumerate(pieces):
        out += struct.pack("<fi", -float(i), len(p)) + p
    return out


TOKENIZER_JSON = (b'{"version":"1.0","added_tokens":[{"id":0,"content":"<s>","special":true}],"normalizer":null,'
                  b'"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},"post_processor":null,'
                  b'"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{"<s>":0,"a":1,"b":2,"ab":3,"\\u0120":4},'
                  b'"merges":["a b"]}}')
SP_TOKENIZER_JSON = (b'{"version":"1.0","added_tokens":[],"normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend",'
                     b'"prepend":"\\u2581"},{"type":"Replace","pattern":{"String":" "},"content":"\\u2581"}]},"pre_tokenizer":null,'
                     b'"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"\\u2581"},"content":" "},'
                     b'{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},'
                     b'"model":{"type":"BPE","byte_fallback":true,"unk_token":"<unk>","vocab":{"<unk>":0,"<0x41>":1,"\\u2581":2,"h":3,"i":4,"hi":5},'
                     b'"merges":["h i"]}}')


def seeds():
    for name, data in onnx_seeds():
        yield "onnx_model", name, data
    for name, text in [("weights", "weights.bin\n0\n64\n1\n4,4"), ("offset_f16", "weights.bin\n128\n32\n10\n16"),
                       ("no_length", "weights.bin\n64\n\n6\n2,2"), ("link", "link.bin\n0\n16\n2\n16")]:
        yield "external_data", name + ".txt", text.encode()
    for name in ["models/default", "tests/fixtures/exports/llama-optimum", "tests/fixtures/exports/qwen3-optimum",
                 "tests/fixtures/encoders/bert-optimum"]:
        yield "tokenizer_json", name.replace("/", "_") + ".json", open(os.path.join(ROOT, name, "tokenizer.json"), "rb").read()
    yield "tokenizer_json", "byte_level.json", TOKENIZER_JSON
    yield "tokenizer_json", "sentencepiece_bpe.json", SP_TOKENIZER_JSON
    # nesting near the limit and decoders that grow text: what hostile input round two found
    yield "tokenizer_json", "nested_decoders.json", b'{"model":{"type":"BPE","vocab":{"a":0,"<unk>":1},"merges":[],"unk_token":"<unk>"},"decoder":' + \
        b'{"type":"Sequence","decoders":[' * 20 + b'{"type":"Replace","pattern":{"String":"a"},"content":"aa"}' + b"]}" * 20 + b"}"
    for i, text in enumerate(["Hello world", "naïve 日本語 🙂 12345", "  \t\n<|endoftext|>", "\xff\xfe", "x" + "ab" * 500]):
        for pick in range(6):
            yield "tokenizer_text", f"{pick}_{i}.txt", bytes([pick]) + text.encode("utf-8", "surrogateescape")
    for pick in range(6):  # 1,000 and 65,535 letters
        yield "tokenizer_long_word", f"{pick}_short.bin", bytes([pick, 0xE8, 0x03]) + b"theQuickBrownFox"
        yield "tokenizer_long_word", f"{pick}_64k.bin", bytes([pick, 0xFF, 0xFF]) + bytes(range(7, 250, 3))
    for pick, rel in [(0, "tests/fixtures/exports/llama-optimum/config.json"), (1, "tests/fixtures/exports/llama-optimum/generation_config.json"),
                      (0, "tests/fixtures/exports/gpt2-optimum/config.json")]:
        yield "model_config", f"{pick}_" + rel.split("/")[-2] + "_" + rel.split("/")[-1], bytes([pick]) + open(os.path.join(ROOT, rel), "rb").read()
    yield "model_config", "2_genai.json", b'\x02{"model":{"type":"llama","vocab_size":32,"context_length":128,"eos_token_id":[2,3]}}'
    yield "chat_template", "0_default.json", b"\x00" + open(os.path.join(ROOT, "models/default/tokenizer_config.json"), "rb").read()
    for name, tmpl in [("chatml", "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"),
                       ("llama3", "<|start_header_id|>{{ role }}<|end_header_id|>\n\n{{ content }}<|eot_id|>"),
                       ("phi3", "<|user|>\n{{ content }}<|end|>\n<|assistant|>")]:
        yield "chat_template", "1_" + name + ".jinja", b"\x01" + tmpl.encode()
        yield "chat_template", "0_" + name + ".json", b"\x00" + ('{"chat_template": %s}' % repr(tmpl).replace("'", '"')).encode()
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/chat_templates/*.jinja"))):  # the real ones
        yield "chat_template", "1_real_" + os.path.basename(path), b"\x01" + open(path, "rb").read()
    yield "llama2c_checkpoint", "tiny.bin", llama2c_bytes()
    yield "llama2c_checkpoint", "tiny_gqa_unshared.bin", llama2c_bytes(heads=2, kv_heads=1, vocab=-32) + \
        np.zeros(32 * 8, np.float32).tobytes()
    pieces = [b"<unk>", b"<s>", b"</s>"] + [b"<0x%02X>" % b for b in range(256)] + [bytes([b]) for b in range(32, 127)] + \
        [b"he", b"ll", b"hell", b"hello", b" "]
    yield "llama2c_tokenizer", "ascii.bin", struct.pack("<H", len(pieces)) + llama2c_tokenizer_bytes(pieces)
    yield "gguf", "llama_f32.gguf", llama_gguf()
    yield "gguf", "llama_q8_0.gguf", llama_gguf(quantized=True)
    for name, chat, body in [
            ("completion", 0, {"model": "m", "prompt": "Once upon", "max_tokens": 16, "temperature": 0.7, "top_p": 0.9, "stop": ["\n", "END"], "seed": 3}),
            ("completion_stream", 0, {"prompt": ["x"], "stream": True, "stream_options": {"include_usage": True}, "n": 2, "echo": True}),
            ("chat", 1, {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                         "max_completion_tokens": 8, "temperature": 0, "logprobs": False, "response_format": {"type": "text"}}),
            ("embeddings", 2, {"model": "m", "input": ["Once upon", [101, 7592, 102]], "encoding_format": "base64"})]:
        yield "serve_request", name + ".json", bytes([chat]) + json.dumps(body).encode()
    person = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                               "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
                                               "pet": {"$ref": "#/$defs/Pet"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
              "required": ["name", "age"], "additionalProperties": False,
              "$defs": {"Pet": {"type": "object", "properties": {"kind": {"const": "cat"}}, "required": ["kind"]}}}
    yield "json_schema", "person.bin", json.dumps(person).encode() + b"\0" + \
        b'{"name": "Ann", "age": 7, "tags": ["a"], "pet": {"kind": "cat"}, "note": null}'
    tree = {"$ref": "#/$defs/T", "$defs": {"T": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/T"}}}}}}
    yield "json_schema", "tree.bin", json.dumps(tree).encode() + b"\0" + b'{"kids": [{"kids": [{}]}, {}]}'
    # genai's tool-call guidance: an array of calls, objects told apart by their name, fixed separators
    call = lambda name, params: {"type": "object", "properties": {"name": {"const": name}, "parameters": params},
                                 "required": ["name", "parameters"], "additionalProperties": False}
    calls = {"x-guidance": {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "},
             "type": "array", "minItems": 1, "items": {"anyOf": [
                 call("get_weather", {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
                 call("get_time", {"type": "object", "properties": {"zone": {"enum": [1, 2]}}})]}}
    yield "json_schema", "tool_calls.bin", json.dumps(calls).encode() + b"\0" + \
        b'[{"name": "get_time", "parameters": {"zone": 2}}, {"name": "get_weather", "parameters": {"city": "Oslo"}}]'


# --- hostile inputs: (target, file, bytes, the error its message must contain) -----------------------------
def bad_inputs():
    ok = onnx_seeds()
    _, good = next(ok)
    x, y = [vi("x", F, [2])], [vi("y", F, None)]
    ident = [helper.make_node("Identity", ["x"], ["y"])]
    yield "onnx_model", "empty.onnx", b"", "has no graph"
    # one unbroken 65,535-letter word through each real tokenizer: merged in O(n log n), back whole (issue 51)
    for pick in range(7):
        yield "tokenizer_long_word", f"{pick}_64k_letters.bin", bytes([pick, 0xFF, 0xFF]) + b"zQxJkVbPwYmFgHcLdTsRnEaOiUy", "(no error)"
    yield "onnx_model", "truncated.onnx", good[: len(good) // 2], "is not a valid ONNX model (truncated or corrupt protobuf)"
    yield "onnx_model", "garbage.onnx", bytes(range(256)) * 4, "is not a valid ONNX model"
    yield "onnx_model", "unknown_op.onnx", model_bytes([helper.make_node("FrobnicateAll", ["x"], ["y"])], x, y), "FrobnicateAll"
    yield "onnx_model", "unknown_domain_op.onnx", model_bytes([helper.make_node("Foo", ["x"], ["y"], domain="com.evil")], x, y, domains=["com.evil"]), "com.evil"
    yield "onnx_model", "string_input.onnx", model_bytes(ident, [vi("x", TensorProto.STRING, [2])], y), "string"
    yield "onnx_model", "unknown_dtype_initializer.onnx", model_bytes(ident, [], y, [raw("x", 99, [1], b"\0\0\0\0")]), "data type 99 is not supported"
    yield "onnx_model", "raw_data_short.onnx", model_bytes(ident, [], y, [raw("x", F, [4], b"\0" * 8)]), "raw_data has 8 bytes"
    yield "onnx_model", "negative_dim.onnx", model_bytes(ident, [], y, [raw("x", F, [-3], b"")]), "negative dimension -3"
    yield "onnx_model", "huge_raw_claim.onnx", model_bytes(ident, [], y, [raw("x", F, [1000000, 1000000], b"\0" * 4)]), "raw_data has 4 bytes, shape [1000000,1000000] of float32 needs 4000000000000"
    t = raw("x", F, [1000000, 1000000], b"")
    t.ClearField("raw_data")
    t.float_data.append(1.0)
    yield "onnx_model", "huge_typed_claim.onnx", model_bytes(ident, [], y, [t]), "has 1 values, its shape needs 1000000000000"
    yield "onnx_model", "overflow_dims.onnx", model_bytes(ident, [], y, [raw("x", F, [1 << 40, 1 << 40], b"")]), "shape is too large"
    for name, t, err in [
            ("ext_absolute", external("x", [4], "/etc/hostname", 0, 16), "is an absolute path"),
            ("ext_dotdot", external("x", [4], "../outside/secret.bin", 0, 16), "leaves the model folder ('..')"),
            ("ext_symlink", external("x", [4], "link.bin", 0, 16), "resolves outside the model folder"),
            ("ext_missing", external("x", [4], "absent.bin", 0, 16), "does not exist"),
            ("ext_directory", external("x", [4], ".", 0, 16), "is not a regular file"),
            ("ext_offset_past_end", external("x", [4], "weights.bin", 5000, 16), "offset 5000 is past the end"),
            ("ext_bytes_past_end", external("x", [4], "weights.bin", 4088, 16), "are past the end of 'weights.bin'"),
            ("ext_length_mismatch", external("x", [4], "weights.bin", 0, 12), "external length 12 bytes"),
            ("ext_offset_not_a_number", external("x", [4], "weights.bin", "12abc", 16), "offset '12abc' is not a byte count"),
            ("ext_negative_length", external("x", [4], "weights.bin", 0, -16), "length '-16' is not a byte count"),
            ("ext_no_location", external("x", [4], "", 0, 16), "external data has no location")]:
        yield "onnx_model", name + ".onnx", ext_model(t), err
    yield "onnx_model", "output_is_initializer.onnx", model_bytes([helper.make_node("Neg", ["x"], ["w"])], x, y,
                                                                  [numpy_helper.from_array(np.zeros(2, np.float32), "w")]), "is already a graph input or initializer"
    yield "onnx_model", "input_not_produced.onnx", model_bytes([helper.make_node("Add", ["x", "ghost"], ["y"])], x, y), "input 'ghost' is not produced"
    yield "onnx_model", "output_not_produced.onnx", model_bytes(ident, x, [vi("nowhere", F, None)]), "graph output 'nowhere' is not produced"
    yield "onnx_model", "cycle.onnx", model_bytes([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
                                                   helper.make_node("Identity", ["a"], ["y"])], x, y), "has a cycle through Add node"
    yield "onnx_model", "sparse_initializer.onnx", sparse_model(), "sparse initializers are not supported"
    yield "onnx_model", "matmul_shape_mismatch.onnx", model_bytes([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", F, [2, 3])], y,
                                                                  [numpy_helper.from_array(np.zeros((4, 5), np.float32), "w")]), "MatMul node 'MatMul_0': inner dimensions differ"
    nbits = helper.make_node("MatMulNBits", ["x", "b", "s"], ["y"], domain="com.microsoft", K=32, N=16, bits=4, block_size=32, accuracy_level=4)
    yield "onnx_model", "matmulnbits_blocks_short.onnx", model_bytes(
        [nbits], [vi("x", F, [1, 32])], y, [numpy_helper.from_array(np.zeros((16, 1, 1), np.uint8), "b"),
                                            numpy_helper.from_array(np.ones(16, np.float32), "s")], domains=["com.microsoft"]), \
        "MatMulNBits node 'MatMulNBits_0' (domain com.microsoft): MatMulNBits: B has 16 bytes, N·k_blocks·blob needs 256"
    yield "onnx_model", "add_dtype_mismatch.onnx", model_bytes([helper.make_node("Add", ["x", "i"], ["y"])], x, y,
                                                               [numpy_helper.from_array(np.zeros(2, np.int64), "i")]), "Add node 'Add_0': inputs have different types (float32 and int64)"
    # An Add with one input behind an op whose output type is unknown (no shape rule runs first): the RoPE matcher
    # read its second input past the end (fuzz target onnx_model, fixed seed, 2026-11-25).
    yield "onnx_model", "add_one_input.onnx", model_bytes([helper.make_node("Add", ["x"], ["y"])], x, y), \
        "Add node 'Add_0': Add takes 2 inputs, the file gives 1"
    yield "onnx_model", "constant_of_shape_oversize.onnx", model_bytes(
        [helper.make_node("ConstantOfShape", ["s"], ["y"])], [], y, [numpy_helper.from_array(np.array([100000, 100000, 100], np.int64), "s")]), "memory cap"
    yield "onnx_model", "expand_oversize.onnx", model_bytes(
        [helper.make_node("Expand", ["x", "s"], ["y"])], x, y, [numpy_helper.from_array(np.array([1 << 30, 1 << 20, 2], np.int64), "s")]), "memory cap"
    yield "onnx_model", "range_oversize.onnx", model_bytes(
        [helper.make_node("Range", ["a", "b", "c"], ["y"])], [], y,
        [numpy_helper.from_array(np.array(v, np.float32), n) for v, n in ((0, "a"), (1e12, "b"), (1, "c"))]), "memory cap"
    yield "onnx_model", "reshape_bad_shape.onnx", model_bytes(
        [helper.make_node("Reshape", ["x", "s"], ["y"])], x, y, [numpy_helper.from_array(np.array([3, 5], np.int64), "s")]), "cannot reshape [2] to [3,5]"
    yield "onnx_model", "gather_index_out_of_range.onnx", model_bytes(
        [helper.make_node("Gather", ["t", "i"], ["y"])], [], y,
        [numpy_helper.from_array(np.zeros((4, 2), np.float32), "t"), numpy_helper.from_array(np.array([7], np.int64), "i")]), "index 7 is out of range for a dimension of size 4"
    yield "onnx_model", "attribute_wrong_type.onnx", model_bytes([helper.make_node("Softmax", ["x"], ["y"], axis="last")], x, y), "attribute 'axis' is a string, an int was expected"
    yield "onnx_model", "deep_subgraphs.onnx", nested_if(24), "subgraphs nest deeper than 16 levels"
    # Control flow: a branch reading a name nothing outside makes, a body whose arity is not Loop's, a float cond.
    ghost = helper.make_graph([helper.make_node("Add", ["x", "ghost"], ["o"])], "then", [], [vi("o", F, None)])
    plain = helper.make_graph([helper.make_node("Identity", ["x"], ["o2"])], "else", [], [vi("o2", F, None)])
    yield "onnx_model", "if_branch_reads_nothing.onnx", model_bytes(
        [helper.make_node("If", ["c"], ["y"], then_branch=ghost, else_branch=plain)], [vi("c", TensorProto.BOOL, [])] + x, y), \
        "If node 'If_0': input 'ghost' is not produced by any node, graph input or initializer"
    yield "onnx_model", "if_cond_float.onnx", model_bytes(
        [helper.make_node("If", ["x"], ["y"], then_branch=plain, else_branch=plain)], x, y), "If node 'If_0': input 0 has data type float32, which this op does not support"
    body = helper.make_graph([helper.make_node("Identity", ["i"], ["b"])], "body", [vi("i", I64, []), vi("c", TensorProto.BOOL, [])],
                             [vi("b", TensorProto.BOOL, [])])
    yield "onnx_model", "loop_body_arity.onnx", model_bytes(
        [helper.make_node("Loop", ["m", "", "x"], ["y"], body=body)], x, y, [numpy_helper.from_array(np.array(3, np.int64), "m")]), \
        "Loop node 'Loop_0': has 3 inputs; its body 'body' takes 2 of them and its subgraphs read 0 values from outside"
    # No trip count and a body that hands its condition back unchanged: a loop that never ends (it ran forever).
    forever = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Identity", ["v"], ["v_out"])], "body",
                                [vi("i", I64, []), vi("c", TensorProto.BOOL, []), vi("v", F, [2])],
                                [vi("c_out", TensorProto.BOOL, []), vi("v_out", F, [2])])
    yield "onnx_model", "loop_never_ends.onnx", model_bytes([helper.make_node("Loop", ["", "", "x"], ["y"], body=forever)], x, y), \
        "Loop node 'Loop_0': never ends: it has no trip count M, and its body hands its condition (true) back unchanged"
    # Shape arithmetic near 2^63 (UBSan: signed overflow the release build went on with): pads, split sizes.
    yield "onnx_model", "pad_overflow.onnx", model_bytes(
        [helper.make_node("Pad", ["x", "p"], ["y"])], x, y, [numpy_helper.from_array(np.array([1 << 62, 1 << 62], np.int64), "p")]), \
        "does not fit an int64"
    yield "onnx_model", "pad_out_of_range.onnx", model_bytes(
        [helper.make_node("Pad", ["x", "p"], ["y"])], x, y, [numpy_helper.from_array(np.array([-(1 << 63), (1 << 63) - 1], np.int64), "p")]), \
        "pad -9223372036854775808 is out of range"
    yield "onnx_model", "split_sizes_overflow.onnx", model_bytes(
        [helper.make_node("Split", ["x", "s"], ["a", "b"])], x, [vi("a", F, None), vi("b", F, None)],
        [numpy_helper.from_array(np.array([(1 << 63) - 1, 2], np.int64), "s")]), "Split sizes: 9223372036854775807 + 2 does not fit an int64"
    yield "onnx_model", "no_op_type.onnx", model_bytes([helper.make_node("", ["x"], ["y"], name="anon")], x, y), "node #0 ('anon') has no op_type"
    # a node name that is not UTF-8 (Python's protobuf will not write one: patched in after serializing)
    yield "onnx_model", "name_not_utf8.onnx", model_bytes([helper.make_node("Relu", ["x"], ["y"], name="anonQ")], x, y).replace(
        b"anonQ", b"anon\xd2"), "the string onnx.NodeProto.name at byte"

    for name, text, err in [
            ("absolute.txt", "/etc/hostname\n0\n16\n2\n16", "is an absolute path"),
            ("dotdot.txt", "sub/../../outside/secret.bin\n0\n16\n2\n16", "leaves the model folder"),
            ("symlink.txt", "link.bin\n0\n16\n2\n16", "resolves outside the model folder"),
            ("missing.txt", "nothing.bin\n0\n16\n2\n16", "does not exist"),
            ("offset_past_end.txt", "weights.bin\n4097\n2\n2\n1", "offset 4097 is past the end"),
            ("length_past_end.txt", "weights.bin\n4000\n200\n2\n200", "are past the end of"),
            ("negative_offset.txt", "weights.bin\n-8\n8\n2\n8", "offset '-8' is not a byte count"),
            ("offset_overflow.txt", "weights.bin\n99999999999999999999999\n8\n2\n8", "is not a byte count"),
            ("huge_shape.txt", "weights.bin\n0\n\n1\n1000000000,1000000000", "shape is too large"),
            ("directory.txt", ".\n0\n16\n2\n16", "is not a regular file"),
            ("no_location.txt", "", "external data has no location"),
            ("string_dtype.txt", "weights.bin\n0\n16\n8\n2", "string tensors are not supported")]:
        yield "external_data", name, text.encode(), err

    for name, data, err in [
            ("not_json.json", b"{\"model\": ", "is not valid JSON"),
            ("no_model.json", b"{}", "key 'model' not found"),
            ("wordpiece.json", b'{"model":{"type":"WordPiece","vocab":{}}}', "a WordPiece model needs its unk_token in the vocabulary"),
            ("unigram.json", b'{"model":{"type":"Unigram","vocab":[]}}', "model type Unigram"),
            ("vocab_id_string.json", b'{"model":{"type":"BPE","vocab":{"a":"zero"},"merges":[]}}', "the id of 'a' must be an integer, not \"zero\""),
            ("vocab_id_negative.json", b'{"model":{"type":"BPE","vocab":{"a":-1},"merges":[]}}', "token id -1"),
            ("vocab_id_huge.json", b'{"model":{"type":"BPE","vocab":{"a":9000000000000},"merges":[]}}', "token id 9000000000000"),
            ("merge_no_space.json", b'{"model":{"type":"BPE","vocab":{"a":0},"merges":["ab"]}}', "merge 'ab' has no space"),
            ("merge_short_pair.json", b'{"model":{"type":"BPE","vocab":{"a":0},"merges":[["a"]]}}', "array index 1 is out of range"),
            ("added_token_no_id.json", b'{"added_tokens":[{"content":"x"}],"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}', "key 'id' not found"),
            # Nesting past core/json.h's kMaxJsonDepth (200,000 levels of Sequence overflowed the stack; the unit
            # test builds that one), and decoders that multiply the text (a Sequence of Replace, 100x each).
            ("deep_nesting.json", b'{"model":' + b"[" * 200 + b"]" * 200 + b"}", "its JSON nests deeper than 128 levels"),
            ("decoder_blowup.json", b'{"model":{"type":"BPE","vocab":{"a":0,"<unk>":1},"merges":[],"unk_token":"<unk>"},"decoder":{"type":"Sequence","decoders":['
             + b",".join([b'{"type":"Replace","pattern":{"String":"a"},"content":"' + b"a" * 100 + b'"}'] * 6) + b"]}}",
             "its decoder Replace would turn 100 bytes into 10000")]:
        yield "tokenizer_json", name, data, err

    yield "model_config", "0_not_json.json", b"\x00{", "is not valid JSON"
    yield "model_config", "0_context_1e18.json", b'\x00{"max_position_embeddings": 1000000000000000000}', "config.json: max_position_embeddings 1000000000000000000 is out of range"
    yield "model_config", "2_context_float.json", b'\x02{"model": {"context_length": 1e18}}', "genai_config.json: context_length must be an integer, not 1e+18"
    yield "model_config", "0_vocab_4g.json", b'\x00{"vocab_size": 4294967296}', "config.json: vocab_size 4294967296 is out of range"
    deep = b'{"type": "object", "properties": {"a": ' + b'{"items": ' * 80 + b"{}" + b"}" * 80 + b"}}"  # (82 JSON levels)
    yield "json_schema", "deep.bin", deep + b"\0{}", "nested deeper than 64"
    yield "json_schema", "true.bin", b"true \0{}", "the top level must be an object"  # (found by the fuzzer)
    yield "json_schema", "self_ref.bin", b'{"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}}\0{"x": [1, {"y": null}]}', "(no error)"
    yield "json_schema", "huge_min_items.bin", b'{"type": "object", "properties": {"a": {"type": "array", "minItems": 9000000000000000000}}, "required": ["a"]}\0{"a": [', "more than an answer may hold"
    # a required property that recurses into itself: no finite value (was taken, and its sequence ended empty)
    yield "json_schema", "required_recursion.bin", b'{"$ref": "#/$defs/N", "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}, "required": ["next"]}}}\0{"next": {', "no finite value takes it"
    yield "serve_request", "deep_nesting.json", b"\x00" + b"[" * 100000 + b"]" * 100000, "the request body"
    yield "serve_request", "wrong_type.json", b"\x01" + b'{"messages": [{"role": "user", "content": "x"}], "n": "2"}', "'n' must be an integer, not a string"
    yield "chat_template", "0_not_json.json", b"\x00{\"chat_template\": [", "tokenizer_config.json' is not valid JSON"
    # (libFuzzer's find: a \u escape of non-hex digits threw out of std::stoul)
    yield "chat_template", "1_bad_escape.jinja", b"\x01{{ '\\u12G4' }}", "a \\u escape needs 4 hex digits"
    yield "chat_template", "1_deep.jinja", b"\x01{{ " + b"(" * 5000 + b"1" + b")" * 5000 + b" }}", "nests deeper than 100"
    yield "chat_template", "1_doubling.jinja", (b"\x01{% set ns = namespace(x='ab') %}{% for i in range(40) %}"
                                                b"{% set ns.x = ns.x ~ ns.x %}{% endfor %}"), "passes 16777216 bytes"

    yield "llama2c_checkpoint", "too_small.bin", b"\x08\0\0\0", "is too small to be a llama2.c checkpoint"
    yield "llama2c_checkpoint", "zero_dim.bin", llama2c_bytes(dim=0), "implausible header (dim)"
    yield "llama2c_checkpoint", "heads_do_not_divide.bin", llama2c_bytes(dim=8, heads=3), "implausible header (n_heads)"
    yield "llama2c_checkpoint", "truncated_weights.bin", llama2c_bytes(floats=100), "file ends inside tensor"
    yield "llama2c_checkpoint", "huge_claim.bin", llama2c_bytes(dim=65536, hidden=1 << 30, vocab=1 << 30, floats=16), "file ends inside tensor"
    yield "llama2c_checkpoint", "version_2.bin", b"24ka" + struct.pack("<i", 2) + b"\0" * 300, "version 2"

    yield "llama2c_tokenizer", "truncated.bin", struct.pack("<H", 300) + llama2c_tokenizer_bytes([b"a", b"b"]), "ends at token 2 of 300"
    yield "llama2c_tokenizer", "negative_length.bin", struct.pack("<H", 300) + struct.pack("<ifi", 4, 0.0, -5), "token 0 has length -5"
    yield "llama2c_tokenizer", "length_past_end.bin", struct.pack("<H", 300) + struct.pack("<ifi", 4, 0.0, 60000) + b"ab", "ends inside token 0"
    yield "llama2c_tokenizer", "empty.bin", struct.pack("<H", 300), "is empty"

    good = llama_gguf()
    yield "gguf", "bad_magic.gguf", b"GGUX" + good[4:], "is not a GGUF file (no GGUF magic)"
    yield "gguf", "version_1.gguf", good[:4] + struct.pack("<I", 1) + good[8:], "is GGUF version 1, which tern does not read"
    yield "gguf", "truncated.gguf", good[:200], "claims 11 tensors; the file cannot hold them"
    yield "gguf", "tensor_count_huge.gguf", good[:8] + struct.pack("<Q", 1 << 60) + good[16:], "claims 1152921504606846976 tensors; the file cannot hold them"
    yield "gguf", "kv_count_huge.gguf", good[:16] + struct.pack("<Q", 1 << 60) + good[24:], "metadata entries; the file cannot hold them"
    yield "gguf", "string_length_huge.gguf", good[:24] + struct.pack("<Q", 1 << 62) + good[32:], "a metadata key needs 4611686018427387904 bytes"
    arr = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 4, 1 << 60)
    yield "gguf", "array_length_huge.gguf", arr, "an array of 1152921504606846976 elements cannot fit"
    nested = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 9, 1) * 2000
    yield "gguf", "nested_arrays.gguf", nested, "elements cannot fit"
    yield "gguf", "unknown_value_type.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<I", 77), "has value type 77, not a GGUF type"
    one = lambda dims, gtype=0, off=0: b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + struct.pack("<Q", 1) + b"t" + struct.pack("<I", len(dims)) + \
        b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", gtype, off) + b"\0" * 64
    yield "gguf", "tensor_past_end.gguf", one([1024]), "ends past the end of the file"
    yield "gguf", "tensor_dims_overflow.gguf", one([1 << 40, 1 << 40]), "tensor 't' has an impossible dim 1099511627776"
    yield "gguf", "tensor_unknown_type.gguf", one([4], 99), "has ggml type 99, which tern does not know"
    yield "gguf", "tensor_too_many_dims.gguf", one([1] * 9), "has 9 dims (1 to 4)"
    yield "gguf", "tensor_offset_unaligned.gguf", one([1], 0, 3), "not a multiple of the alignment 32"
    yield "gguf", "bad_alignment.gguf", gguf_bytes([], {"general.alignment": U32(3)}), "general.alignment must be a power of two, got 3"
    yield "gguf", "string_alignment.gguf", gguf_bytes([], {"general.alignment": "32"}), \
        "general.alignment is of GGUF value type 8; it must be a uint32 (type 4)"
    yield "gguf", "bad_bool.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 7) + b"general" + struct.pack("<IB", 7, 2), \
        "model.gguf': metadata 'general': a bool holds 2"
    yield "gguf", "not_llama.gguf", gguf_bytes([], {"general.architecture": "mamba"}), "architecture 'mamba'"
    yield "gguf", "implausible_layers.gguf", llama_gguf(**{"llama.block_count": 100000}), "implausible hyperparameters"
    yield "gguf", "bos_out_of_range.gguf", llama_gguf(**{"tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.bos_token_id": 999}), "999"
    # Keys that change the math: imported (linear, YaRN, rope_freqs) or refused naming the key, never ignored.
    yield "gguf", "expert_count.gguf", llama_gguf(**{"llama.expert_count": 8}), "llama.expert_count 8: a mixture of experts"
    yield "gguf", "alibi.gguf", llama_gguf(**{"llama.attention.max_alibi_bias": 8.0}), "llama.attention.max_alibi_bias 8: ALiBi"
    yield "gguf", "rope_longrope.gguf", llama_gguf(**{"llama.rope.scaling.type": "longrope", "llama.rope.scaling.factor": 4.0}), \
        "llama.rope.scaling.type 'longrope': tern imports RoPE scaling none, linear and yarn"
    yield "gguf", "rope_factor_nan.gguf", llama_gguf(**{"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": float("nan")}), \
        "llama.rope.scaling.factor nan is not a RoPE scaling value"
    yield "gguf", "rope_factor_negative.gguf", llama_gguf(**{"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": -4.0}), \
        "llama.rope.scaling.factor -4 is not a RoPE scaling value"
    yield "gguf", "yarn_log_multiplier.gguf", llama_gguf(**{"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 4.0,
                                                          "llama.rope.scaling.yarn_log_multiplier": 0.1}), "YaRN with a log multiplier"
    yield "gguf", "rope_freqs_short.gguf", llama_gguf(extra_tensors=[("rope_freqs.weight", [3], 0, np.ones(3, np.float32).tobytes())]), \
        "tensor rope_freqs.weight is not 8 float32 values"
    yield "gguf", "rope_freqs_zero.gguf", llama_gguf(extra_tensors=[("rope_freqs.weight", [8], 0, np.zeros(8, np.float32).tobytes())]), \
        "rope_freqs.weight[0] 0 is not a frequency factor"
    yield "gguf", "rope_factors_long.gguf", llama_gguf(extra_tensors=[("rope_factors_long.weight", [8], 0, np.ones(8, np.float32).tobytes())]), \
        "LongRoPE"
    yield "gguf", "missing_tensor.gguf", gguf_bytes(gguf_tensor_subset(), {k: v for k, v in gguf_llama_kvs().items()}), "has no tensor 'blk.0.attn_norm.weight'"

    yield "weight_pack", "empty.tern-pack", b"", "not a tern pack (no TERNPACK magic)"
    yield "weight_pack", "bad_magic.tern-pack", b"NOTAPACK" + b"\0" * 64, "not a tern pack (no TERNPACK magic)"
    yield "weight_pack", "huge_header.tern-pack", b"TERNPACK" + struct.pack("<II", PACK_VERSION, 0xFFFFFFF0) + b"{}", "header of 4294967280 bytes is past the end of the file"
    yield "weight_pack", "header_not_json.tern-pack", b"TERNPACK" + struct.pack("<II", PACK_VERSION, 4) + b"{{{{", "header is not valid"
    yield "weight_pack", "wrong_version.tern-pack", b"TERNPACK" + struct.pack("<II", 99, 2) + b"{}", "version 99"


def gguf_llama_kvs():
    return {"general.architecture": "llama", "llama.block_count": 1, "llama.embedding_length": 32, "llama.feed_forward_length": 32,
            "llama.attention.head_count": 2, "llama.attention.layer_norm_rms_epsilon": 1e-5, "llama.context_length": 32,
            "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.merges": []}


def gguf_tensor_subset():
    return [("token_embd.weight", [32, 2], 0, np.zeros((2, 32), np.float32).tobytes())]


def sparse_model():
    m = onnx.load_from_string(model_bytes([helper.make_node("Identity", ["x"], ["y"])], [], [vi("y", F, None)]))
    sp = m.graph.sparse_initializer.add()
    sp.values.CopyFrom(helper.make_tensor("x", F, [1], [1.0]))
    sp.indices.CopyFrom(helper.make_tensor("x_i", I64, [1], [0]))
    sp.dims.extend([4])
    return m.SerializeToString()


def nested_if(depth):
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["o0"])], "leaf", [], [vi("o0", F, None)])
    g = leaf
    for d in range(1, depth):
        g = helper.make_graph([helper.make_node("If", ["c"], [f"o{d}"], then_branch=g, else_branch=leaf)], f"g{d}", [], [vi(f"o{d}", F, None)])
    node = helper.make_node("If", ["c"], ["y"], then_branch=g, else_branch=leaf)
    return model_bytes([node], [vi("c", TensorProto.BOOL, []), vi("x", F, [2])], [vi("y", F, None)])


# Files the fuzzers found (tests/bad_inputs/<target>/<file>, kept as they are): file -> expected error.
REPRODUCERS = {
    # An Add of shape-like values, one of them empty: symbolic_elements read element 0 of the empty one.
    "onnx_model/add_empty_shape_value.onnx": "Expand node 'Expand_45': shapes [2,3,1,18,8] and [3,18] cannot be broadcast",
    "llama2c_checkpoint/seq_len_huge.bin": "implausible header (seq_len past 2^20 positions)",
    "gguf/token_not_utf8.gguf": "is corrupt: tokenizer.ggml.tokens holds a string of 1 bytes at offset 527 that is not UTF-8",
    "onnx_model/attention_no_keys.onnx": "(no error)",
    "onnx_model/reshape_known_overflow.onnx": "Reshape node 'Reshape_1': shape [0,-1,281474976710658,48378511624704] overflows int64",
    "onnx_model/attention_past_scalar.onnx": "Attention node 'Attention_0': input 4 has rank 0; its dim 2 is needed",
    "onnx_model/constant_value_not_tensor.onnx": "Constant node 'Constant_0': attribute 'value' is a string, a tensor was expected",
    "onnx_model/norm_scale_grows_input.onnx": "LayerNormalization node 'LayerNormalization_0': [3,2,5] does not broadcast to [2,5]",
    "tokenizer_json/vocab_id_float.json": "tokenizer.json: the id of 'hab' must be an integer, not 9.111111111111112e+88",
    "onnx_model/range_uncountable.onnx": "Range node 'Range_16': start -2.59615e+33, limit 0, delta 1 give no countable length",
    "onnx_model/topk_scalar.onnx": "TopK node 'TopK_0': axis 0 is out of range for rank 0",
    # A RoPE-shaped chain whose Add has one input, its other operand's type unknown: the RoPE matcher read past
    # the Add's inputs (CI's fuzz pass, 2026-11-25).
    "onnx_model/rope_add_one_input.onnx": "Add takes 2 inputs, the file gives 1",
    "llama2c_tokenizer/vocab_too_small.bin": "a vocabulary of 103 tokens; llama2.c tokenizers hold at least 259",
    "onnx_model/reduce_scalar_axis.onnx": "axis 0 is out of range for rank 0",
    "onnx_model/scatternd_scalar_indices.onnx": "ScatterND node 'ScatterND_0': dimension -1 of a tensor of shape [] does not exist",
    "onnx_model/attention_batch_mismatch.onnx": "Attention node 'Attention_0': batch of queries 1, keys 0, values 1 differ",
    "onnx_model/scatter_indices_rank.onnx": "indices of rank 2 for data of rank 1 (they must match)",
    # Split with num_outputs 0: the equal parts divided by it (the CI replay's seed on a faster machine).
    "onnx_model/split_num_outputs_zero.onnx": "Split node 'Split_0': num_outputs 0 for 2 outputs",
    # Made with onnx.helper beside the ops they probe (issue 74's quantized ops), kept as they are.
    "onnx_model/matmulinteger_float_zero_point.onnx": "MatMulInteger node 'mmi': input 3 (a zero point) is float32, its operand int8",
    "onnx_model/dequantizelinear_blocked_scale_shape.onnx":
        "DequantizeLinear node 'dq': the scale has shape [2,2]; blocks of 2 along axis 1 of [2,6] need [2,3]",
    "onnx_model/dynamicquantizematmul_scale_count.onnx":
        "DynamicQuantizeMatMul node 'dqmm' (domain com.microsoft): b_scale has 5 values; it takes 1 or one per column of B (3)",
    "onnx_model/matmulbnb4_absmax_count.onnx": "MatMulBnb4 node 'bnb' (domain com.microsoft): absmax has 7 values; 128 codes in blocks of 64 need 2",
    "onnx_model/matmulbnb4_huge_k_n.onnx": "MatMulBnb4 node 'bnb' (domain com.microsoft): K · N: 1099511627776 x 1099511627776 does not fit",
    # tern's own CachedAttention as a file may carry it (issue 78's quantized ring): a storage it does not know.
    "onnx_model/cached_attention_storage_unknown.onnx": "storage 'q5_1' is none of fp32, fp16, q8_0, q4_0",
}


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def pack_model():
    """tests/fuzz/pack_model/model.onnx: one MatMul of a constant 16x16 weight, what the weight_pack target's packs
    belong to (their seed: `tern pack tests/fuzz/pack_model OUT` once this file changes)."""
    w = numpy_helper.from_array(np.random.default_rng(3).standard_normal((16, 16)).astype(np.float32), "w")
    return model_bytes([helper.make_node("MatMul", ["x", "w"], ["y"])], [vi("x", F, [1, 16])], [vi("y", F, None)], [w])


def main():
    write(os.path.join(ROOT, "tests", "fuzz", "pack_model", "model.onnx"), pack_model())
    for target in os.listdir(CORPUS) if os.path.isdir(CORPUS) else []:
        for f in os.listdir(os.path.join(CORPUS, target)):
            if not f.endswith(".tern-pack"):
                os.remove(os.path.join(CORPUS, target, f))
    for target, name, data in seeds():
        write(os.path.join(CORPUS, target, name), data)
    lines = ["# <target>/<file>: text the tern::Error message must contain (written by tests/fuzz/make_corpus.py)"]
    kept = set(REPRODUCERS)
    if os.path.isdir(BAD):
        for target in os.listdir(BAD):
            if os.path.isdir(os.path.join(BAD, target)):
                for f in os.listdir(os.path.join(BAD, target)):
                    if f"{target}/{f}" not in kept:
                        os.remove(os.path.join(BAD, target, f))
    for target, name, data, err in bad_inputs():
        write(os.path.join(BAD, target, name), data)
        lines.append(f"{target}/{name}: {err}")
    lines += [f"{k}: {v}" for k, v in sorted(REPRODUCERS.items())]
    write(os.path.join(BAD, "expected.txt"), ("\n".join(lines) + "\n").encode())
    print(len(lines) - 1, "hostile inputs,", sum(len(os.listdir(os.path.join(CORPUS, t))) for t in os.listdir(CORPUS)), "seeds")


if __name__ == "__main__":
    main()
