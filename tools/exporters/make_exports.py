#!/usr/bin/env python3
"""The exporter matrix: small random-weight models of each architecture, built from their transformers
config classes (no hub), exported by each exporter, with ONNX Runtime's greedy tokens as goldens.

    $(tools/exporters/setup_venv.sh) tools/exporters/make_exports.py [--out tests/fixtures/exports]
                                                                      [--only ARCH[-EXPORTER],...]
    $(tools/exporters/setup_venv.sh current) tools/exporters/make_exports.py [...]

Each venv makes the cells its exporters run in: Optimum's (optimum, ort-int4, tjs-*, merged*) need
optimum-onnx, which holds transformers below 4.58 (requirements.txt); torchscript, dynamo and genai-* run on the
newest transformers, torch and onnxruntime-genai builder (requirements-current.txt). Run both for the whole matrix.

Each cell becomes OUT/<arch>-<exporter>/ holding model.onnx (weights inside; under 1 MB), config.json,
generation_config.json, the genai builder's genai_config.json where it made one, tokenizer.json (256
byte-level tokens) and greedy.json: ONNX Runtime's greedy tokens for one prompt and for a padded batch of
two (left-padded; right-padded for the genai builder, whose GroupQueryAttention reads prompts so), 64 new
tokens, and the prefill's logits at each row's last token. Exporters:
  torchscript  torch.onnx.export(dynamo=False) of the model in eager attention, fed a 4-D additive mask
               built in the graph from attention_mask as transformers <= 4.35 did (softmax in fp32: a Cast)
  dynamo       torch.onnx.export(dynamo=True) with SDPA attention
  optimum      Optimum's exporter, task text-generation-with-past
  genai-fp32, genai-int4   the onnxruntime-genai model builder (GroupQueryAttention, MatMulNBits)
  ort-int4     Optimum's export quantized by ONNX Runtime's MatMulNBitsQuantizer as its docs show: 4-bit blocks
               of 32, asymmetric, accuracy level 0, MatMul → MatMulNBits and the embedding's Gather →
               GatherBlockQuantized (tied embeddings keep a float lm_head)
  tjs-q8, tjs-uint8   Optimum's export quantized as transformers.js's scripts/quantize.py writes model_quantized.onnx
               (q8: int8 weights for these graphs) and model_uint8.onnx: onnxruntime.quantization's dynamic IntegerOps —
               MatMul → DynamicQuantizeLinear + MatMulInteger + Cast + Mul, Gather over a uint8/int8 table +
               DequantizeLinear; uint8 only for llama and smollm2 (its zero points; the rest is q8's graph)
  tjs-q4       Optimum's export as transformers.js writes model_q4.onnx: MatMul4BitsQuantizer, blocks of 32, symmetric
  tjs-fp16, tjs-q4f16   Optimum's export as transformers.js writes model_fp16.onnx (its scripts/float16.py, keep_io_types,
               then onnxslim) and model_q4f16.onnx (MatMulNBits blocks of 32, symmetric, then the same conversion). The
               converter is transformers.js's own, not in this repository: give its scripts folder (transformers.js v3,
               before the v4 layout removed it) in $TJS_SCRIPTS; without it these cells are skipped. Their goldens
               also hold ORT's top-2 logit gap at each step (float16 logits tie often: tests compare up to a tie).
  tjs-bnb4     Optimum's export quantized as transformers.js writes model_bnb4.onnx: MatMulBnb4Quantizer, NF4, blocks of
               64; for the architectures issue 74 names (llama, qwen2, qwen3, gemma3, phi3)
  merged, tjs-q8-merged   the layout of older onnx-community repositories' decoder_model_merged.onnx: Optimum's exports
               without and with past merged by optimum.onnx.merge_decoders into one graph that branches (If) on the input
               use_cache_branch (ORT's goldens feed it false at the prefill, as Optimum and transformers.js do, then
               true); tjs-q8-merged quantized as tjs-q8, inside the branches (EnableSubgraph)
A cell an exporter cannot make is reported and skipped (the README's table gives the reason).
"""
import argparse
import copy
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
import onnxruntime as ort
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import DynamicCache, PreTrainedTokenizerFast

VOCAB, NEW_TOKENS = 256, 64
# Small enough that each cell stays under 300 KB: hidden 32, 2 query heads of 16 (ONNX Runtime's
# GroupQueryAttention wants head sizes in multiples of 16) sharing 1 KV head, 2 layers.
SMALL = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def arch_configs():
    t = transformers
    return {
        "llama": t.LlamaConfig(**SMALL, tie_word_embeddings=False),
        "smollm2": t.LlamaConfig(**SMALL, tie_word_embeddings=True, rope_theta=100000.0),  # SmolLM2: tied embeddings
        "qwen2": t.Qwen2Config(**SMALL, tie_word_embeddings=False),  # q/k/v biases
        "qwen3": t.Qwen3Config(**SMALL, head_dim=16, tie_word_embeddings=False),  # QK-norm
        "mistral": t.MistralConfig(**SMALL, sliding_window=None),
        "mistral_sw": t.MistralConfig(**SMALL, sliding_window=16),  # a window the 64 new tokens pass
        "phi3": t.Phi3Config(**SMALL),  # fused qkv_proj and gate_up_proj
        # soft-capping at 1.0 so it changes these small scores (Gemma-2's 50 would not); local layers' window
        # longer than any test sequence
        "gemma2": t.Gemma2Config(**SMALL, head_dim=16, query_pre_attn_scalar=16, sliding_window=4096,
                                 attn_logit_softcapping=1.0, final_logit_softcapping=5.0),
        "gpt_neox": t.GPTNeoXConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=2, max_position_embeddings=256, rotary_pct=0.5,
                                    use_parallel_residual=True, bos_token_id=1, eos_token_id=2),
        "gpt2": t.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=256, bos_token_id=1,
                             eos_token_id=2),
        # Gemma-3: QK-norm, sandwich norms, a sliding window on 5 of every 6 layers with its own RoPE base
        "gemma3": t.Gemma3TextConfig(**SMALL, head_dim=16, query_pre_attn_scalar=16, sliding_window=16,
                                     layer_types=["sliding_attention", "full_attention"]),
        # Phi-2: partial rotary, parallel block, LayerNorm; one head of 32, so the builder's rotary half (8 columns of
        # cos) is what ONNX Runtime's GroupQueryAttention takes (a multiple of 8)
        "phi2": t.PhiConfig(**{**SMALL, "num_attention_heads": 1, "num_key_value_heads": 1}, partial_rotary_factor=0.5),
        "stablelm": t.StableLmConfig(**SMALL, partial_rotary_factor=0.25),  # LayerNorm, partial rotary
        "olmo2": t.Olmo2Config(**SMALL),  # post-norms, QK-norm over all heads
        "granite": t.GraniteConfig(**SMALL, embedding_multiplier=12.0, residual_multiplier=0.22,
                                   attention_multiplier=0.0625, logits_scaling=8.0),
        "cohere": t.CohereConfig(**SMALL, logit_scale=0.125),  # interleaved RoPE, parallel block, LayerNorm
        # 4 KV heads of 128: a float16 cache whose probe (5 positions, 2560 elements) passes the 2048 integers float16
        # holds exactly, as a 1B shape's does (ARCH_ONLY: its float16 cell alone)
        "llama_wide_kv": t.LlamaConfig(**{**SMALL, "num_attention_heads": 4, "num_key_value_heads": 4}, head_dim=128,
                                       tie_word_embeddings=False),
    }


EXPORTERS = ["torchscript", "dynamo", "optimum", "genai-fp32", "genai-int4", "ort-int4", "tjs-q8", "tjs-uint8", "tjs-q4", "tjs-bnb4",
             "tjs-fp16", "tjs-q4f16", "merged", "tjs-q8-merged"]
ISSUE_74_ARCHS = ("llama", "qwen2", "qwen3", "gemma3", "phi3")
ONLY_FOR = {"tjs-uint8": ("llama", "smollm2"), "tjs-q4": ISSUE_74_ARCHS, "tjs-bnb4": ISSUE_74_ARCHS, "tjs-fp16": ISSUE_74_ARCHS,
            "tjs-q4f16": ISSUE_74_ARCHS, "merged": ISSUE_74_ARCHS, "tjs-q8-merged": ISSUE_74_ARCHS}
ARCH_ONLY = {"llama_wide_kv": ("tjs-fp16",)}
PROMPTS = [[1, 17, 200, 34, 99, 5, 61, 130], [1, 42, 7, 250, 88]]


def byte_tokenizer(cfg):
    """256 byte-level tokens, no merges: what the exporters and `tern generate --prompt` need."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    byte_to_char = {b: c for b, c in zip(range(256), sorted(alphabet, key=lambda c: _byte_of(c)))}
    vocab = {byte_to_char[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=byte_to_char[cfg.bos_token_id],
                                   eos_token=byte_to_char[cfg.eos_token_id], pad_token=byte_to_char[0])


def _byte_of(c):  # GPT-2's byte-to-unicode map, inverted
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    if ord(c) in printable:
        return ord(c)
    return sorted(set(range(256)) - set(printable))[ord(c) - 256]


def head_dim(cfg):
    return getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads


class FlatCache(torch.nn.Module):
    """The model with past/present as flat tensors (past_key_values.N.key/value → present.N.key/value)."""

    def __init__(self, model, mask_4d):
        super().__init__()
        self.model, self.mask_4d, self.layers = model, mask_4d, model.config.num_hidden_layers

    def forward(self, input_ids, attention_mask, position_ids, *past):
        cache = DynamicCache()
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        mask = attention_mask
        if self.mask_4d:  # as transformers <= 4.35 built it: causal + padding, additive, min-float
            total, new = attention_mask.shape[1], input_ids.shape[1]
            dtype = self.model.dtype
            q_pos = torch.arange(new, device=input_ids.device) + (total - new)
            causal = torch.arange(total, device=input_ids.device)[None, :] <= q_pos[:, None]
            allowed = causal[None, None, :, :] & attention_mask[:, None, None, :].bool()
            mask = (1.0 - allowed.to(dtype)) * torch.finfo(dtype).min
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids, past_key_values=cache,
                         use_cache=True)
        flat = []
        for layer in out.past_key_values.layers:
            flat += [layer.keys, layer.values]
        return (out.logits, *flat)


def export_torch(model_dir, out_dir, dynamo):
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa" if dynamo else "eager").eval()
    cfg = model.config
    L, kv, D = cfg.num_hidden_layers, getattr(cfg, "num_key_value_heads", cfg.num_attention_heads), head_dim(cfg)
    B, S, P = 2, 3, 4
    ids = torch.randint(3, VOCAB, (B, S))
    mask = torch.ones(B, S + P, dtype=torch.int64)
    pos = torch.arange(P, P + S).expand(B, S)
    past = [torch.randn(B, kv, P, D) for _ in range(2 * L)]
    past_names = [f"past_key_values.{i}.{k}" for i in range(L) for k in ("key", "value")]
    present_names = [f"present.{i}.{k}" for i in range(L) for k in ("key", "value")]
    names = ["input_ids", "attention_mask", "position_ids"] + past_names
    path = str(out_dir / "model.onnx")
    if dynamo:
        b, s, p, t = (torch.export.Dim(n) for n in ("batch", "sequence_length", "past_sequence_length", "total_sequence_length"))
        shapes = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: t}, "position_ids": {0: b, 1: s},
                  "past": [{0: b, 2: p}] * (2 * L)}
        torch.onnx.export(FlatCache(model, False), (ids, mask, pos, *past), path, input_names=names,
                          output_names=["logits"] + present_names, dynamic_shapes=_flat_shapes(shapes), dynamo=True,
                          opset_version=18, external_data=False)
    else:
        axes = {"input_ids": {0: "batch", 1: "sequence_length"}, "attention_mask": {0: "batch", 1: "total_sequence_length"},
                "position_ids": {0: "batch", 1: "sequence_length"}, "logits": {0: "batch", 1: "sequence_length"}}
        axes.update({n: {0: "batch", 2: "past_sequence_length"} for n in past_names})
        axes.update({n: {0: "batch", 2: "total_sequence_length"} for n in present_names})
        torch.onnx.export(FlatCache(model, True), (ids, mask, pos, *past), path, input_names=names,
                          output_names=["logits"] + present_names, dynamic_axes=axes, opset_version=17, dynamo=False)


def _flat_shapes(shapes):  # forward(input_ids, attention_mask, position_ids, *past): past is one nested entry
    return [shapes["input_ids"], shapes["attention_mask"], shapes["position_ids"], tuple(shapes["past"])]


def export_optimum(model_dir, out_dir, post_process=True):
    """post_process=False: past protobuf's 2 GB Optimum's post-processing (its tied-weight deduplication) cannot
    serialize the graph, so a 1B export skips it (its LM head then a weight of its own)."""
    from optimum.exporters.onnx import main_export
    main_export(str(model_dir), output=str(out_dir), task="text-generation-with-past", do_validation=False,
                no_post_process=not post_process)


def export_merged(model_dir, out_dir):
    """decoder_model_merged.onnx as older Optimum wrote it: the exports without and with past, merged."""
    from optimum.exporters.onnx import main_export
    from optimum.onnx import merge_decoders
    with tempfile.TemporaryDirectory() as tmp:
        # (the decoder without past inputs but with present outputs: use_past_in_inputs=False, as the legacy export made it)
        from optimum.exporters.tasks import TasksManager
        config = transformers.AutoConfig.from_pretrained(model_dir)
        make = TasksManager.get_exporter_config_constructor(exporter="onnx", model_type=config.model_type,
                                                            task="text-generation-with-past", library_name="transformers")
        plain = make(config, use_past=True, use_past_in_inputs=False)
        main_export(str(model_dir), output=f"{tmp}/plain", task="text-generation-with-past", do_validation=False,
                    custom_onnx_configs={"model": plain})
        main_export(str(model_dir), output=f"{tmp}/past", task="text-generation-with-past", do_validation=False)
        merge_decoders(f"{tmp}/plain/model.onnx", f"{tmp}/past/model.onnx", save_path=str(out_dir / "model.onnx"), strict=False)
        for f in Path(f"{tmp}/past").iterdir():
            if f.suffix == ".json" and not (out_dir / f.name).exists():
                shutil.copy(f, out_dir / f.name)


def export_genai(model_dir, out_dir, precision):
    with tempfile.TemporaryDirectory() as cache:
        r = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(model_dir), "-o", str(out_dir),
                            "-p", precision, "-e", "cpu", "-c", cache], capture_output=True, text=True)
    if not (out_dir / "model.onnx").exists():
        raise RuntimeError((r.stdout + r.stderr).strip().splitlines()[-1])


def past_protobuf_limit(model):
    """Whether the model's tensors alone pass protobuf's 2 GB (ByteSize() itself fails past it)."""
    return sum(len(t.raw_data) + 4 * (len(t.float_data) + len(t.int32_data)) for t in model.graph.initializer) >= onnx.checker.MAXIMUM_PROTOBUF - 2**24


def save(model, path):
    """One file where it fits protobuf's 2 GB, else the tensors beside it in one file (as Optimum writes a large export)."""
    path = Path(path)
    for f in path.parent.glob(path.name + "_data*"):  # (a source's external data, read into `model` already)
        f.unlink()
    if not past_protobuf_limit(model):
        onnx.save(model, str(path))
    else:
        onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=path.name + "_data")


def quantize_ort_int4(out_dir):
    from onnxruntime.quantization import matmul_nbits_quantizer as mq
    cfg = mq.DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=False, accuracy_level=0, op_types_to_quantize=("MatMul", "Gather"),
                                          quant_axes=(("MatMul", 0), ("Gather", 1)))
    q = mq.MatMulNBitsQuantizer(onnx.load(str(out_dir / "model.onnx")), algo_config=cfg)
    q.process()
    q.model.topological_sort()  # (what ONNXModel.save_model_to_file does first)
    save(q.model.model, out_dir / "model.onnx")


def quantize_tjs_q8(out_dir, weight_type):
    """transformers.js's quantize_q8, argument for argument (per_channel and reduce_range left off)."""
    from onnxruntime.quantization import QuantizationMode, QuantType
    from onnxruntime.quantization.onnx_quantizer import ONNXQuantizer
    from onnxruntime.quantization.registry import IntegerOpsRegistry
    q = ONNXQuantizer(onnx.load(str(out_dir / "model.onnx")), None, None, mode=QuantizationMode.IntegerOps, static=False,
                      weight_qType=getattr(QuantType, weight_type), activation_qType=QuantType.QUInt8, tensors_range=None,
                      nodes_to_quantize=[], nodes_to_exclude=[], op_types_to_quantize=set(IntegerOpsRegistry.keys()),
                      extra_options=dict(EnableSubgraph=True, MatMulConstBOnly=True))
    q.quantize_model()
    save(q.model.model, out_dir / "model.onnx")


def quantize_tjs_bnb4(out_dir):
    """transformers.js's quantize_bnb4 with its defaults: NF4, blocks of 64."""
    from onnxruntime.quantization.matmul_bnb4_quantizer import MatMulBnb4Quantizer
    q = MatMulBnb4Quantizer(onnx.load(str(out_dir / "model.onnx")), MatMulBnb4Quantizer.NF4, 64)
    q.process()
    q.model.topological_sort()  # (what ONNXModel.save_model_to_file does first)
    save(q.model.model, out_dir / "model.onnx")


def convert_tjs_fp16(out_dir):
    """transformers.js's quantize_fp16: its float16 conversion (default op block list, keep_io_types), then onnxslim."""
    import onnxslim
    sys.path.insert(0, os.environ["TJS_SCRIPTS"])
    import float16
    m = onnx.load(str(out_dir / "model.onnx"))
    large = past_protobuf_limit(m)
    if large:  # the conversion's shape inference serializes the model, which protobuf refuses past 2 GB: inferred from
        # the file instead (without it the conversion leaves float32 Adds beside float16 ones, which ORT refuses too)
        inferred = out_dir / "model.inferred.onnx"
        onnx.shape_inference.infer_shapes_path(str(out_dir / "model.onnx"), str(inferred))
        m = onnx.load(str(inferred))
        inferred.unlink()
    m = float16.convert_float_to_float16(m, keep_io_types=True, op_block_list=float16.DEFAULT_OP_BLOCK_LIST,
                                         disable_shape_infer=large)
    m = onnxslim.slim(m)
    # Today's onnx shape inference leaves MatMulNBits' outputs untyped (elem_type 0), which the conversion writes
    # into value_info and ONNX Runtime then refuses ("Invalid tensor data type 0"): such entries say nothing, dropped.
    typed = [v for v in m.graph.value_info if v.type.tensor_type.elem_type != 0]
    del m.graph.value_info[:]
    m.graph.value_info.extend(typed)
    save(m, out_dir / "model.onnx")


def quantize_tjs_q4(out_dir):
    """transformers.js's quantize_q4: MatMul4BitsQuantizer (ONNX Runtime's MatMulNBitsQuantizer), blocks of 32, symmetric."""
    from onnxruntime.quantization import matmul_nbits_quantizer as mq
    q = mq.MatMulNBitsQuantizer(onnx.load(str(out_dir / "model.onnx")), block_size=32, is_symmetric=True)
    q.process()
    q.model.topological_sort()  # (what ONNXModel.save_model_to_file does first)
    save(q.model.model, out_dir / "model.onnx")


def single_file(out_dir):
    """Weights inside model.onnx (the fixtures are small); drops what tern's tests do not read."""
    m = onnx.load(str(out_dir / "model.onnx"))
    for n in m.graph.node:  # the dynamo exporter's per-node stack traces: half the file, not the model
        n.doc_string = ""
        del n.metadata_props[:]
    for f in out_dir.iterdir():
        if f.name.startswith("model.onnx") and f.name != "model.onnx" or f.suffix in (".data",) or f.name in (
                "special_tokens_map.json", "tokenizer_config.json", "chat_template.jinja"):
            f.unlink()
    onnx.save(m, str(out_dir / "model.onnx"))


def ort_greedy(model_path, prompts, eos, kv_dims, right_pad=False, window=None):
    """Greedy generation as tern's generator runs it: left padding (right padding for GroupQueryAttention, which
    reads each row's keys at [0, mask sum): new tokens are appended after a shorter prompt's padding, masked),
    position_ids = cumsum(mask) − 1 (padding 1), the cache fed back, each row's logits at its last real token,
    argmax (first index on ties), stop at eos. kv_dims: the cache's (heads, head size), where the inputs name
    them instead of fixing them (the genai builder from 0.12 on: "kv_heads", "kv_cache_dim"). window: the model's
    sliding window, the slots of a local layer's cache buffer where the genai builder (0.18) writes
    GroupQueryAttention with sliding_window_cache (past "past_sliding_length": ORT wants all its slots fed)."""
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in sess.get_inputs()}
    past_names = [n for n in inputs if n.startswith("past")]
    np_type = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64, "tensor(int32)": np.int32}
    B, longest = len(prompts), max(map(len, prompts))
    pads = [[0] * (longest - len(p)) for p in prompts]
    seq = [p + z if right_pad else z + p for p, z in zip(prompts, pads)]
    mask = [[1] * len(p) + z if right_pad else z + [1] * len(p) for p, z in zip(prompts, pads)]
    tokens, done = [list(p) for p in prompts], [False] * B
    def fixed(n, axis):
        return inputs[n].shape[axis] if isinstance(inputs[n].shape[axis], int) else kv_dims[axis // 2]

    def slots(n):
        return window if "sliding" in str(inputs[n].shape[2]) else 0

    past = {n: np.zeros([B, fixed(n, 1), slots(n), fixed(n, 3)], np_type[inputs[n].type]) for n in past_names}
    cached, prefill, gaps = 0, None, []  # gaps: each step's smallest top-2 logit gap over the rows
    for step in range(NEW_TOKENS):
        total = len(seq[0])
        ids, pos = [], []
        for b in range(B):
            p = np.cumsum(mask[b]) - 1
            ids.append(seq[b][cached:])
            pos.append([int(p[t]) if mask[b][t] else 1 for t in range(cached, total)])
        feeds = {"input_ids": np.array(ids, np_type[inputs["input_ids"].type]), **past}
        if "attention_mask" in inputs:
            feeds["attention_mask"] = np.array(mask, np_type[inputs["attention_mask"].type])
        if "position_ids" in inputs:
            feeds["position_ids"] = np.array(pos, np_type[inputs["position_ids"].type])
        if "use_cache_branch" in inputs:  # (a merged decoder: the branch without past at the prefill)
            feeds["use_cache_branch"] = np.array([cached > 0])
        outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        at = [max(t for t in range(cached, total) if mask[b][t]) - cached for b in range(B)]
        last = np.stack([outs["logits"][b, at[b], :] for b in range(B)]).astype(np.float32)
        top2 = np.sort(last, axis=1)[:, -2:]
        gaps.append(float(np.min(top2[:, 1] - top2[:, 0])))
        if step == 0:
            prefill = last
        for b in range(B):
            nxt = 0 if done[b] else int(np.argmax(last[b]))
            if not done[b]:
                tokens[b].append(nxt)
                done[b] = nxt in eos
            seq[b].append(nxt)
            mask[b].append(1)
        past = {n: outs[n.replace("past_key_values.", "present.")] for n in past_names}
        cached = total
        if all(done):
            break
    return tokens, prefill, gaps


def random_model(cfg, attention=None):
    """The cell's transformers model: seed 0, the same weights on every run (make_hidden_goldens.py rebuilds it)."""
    torch.manual_seed(0)
    cfg = copy.deepcopy(cfg)  # (from_config sets the attention on the config it is given)
    model = transformers.AutoModelForCausalLM.from_config(cfg, **({"attn_implementation": attention} if attention else {}))
    with torch.no_grad():  # weights large enough to keep logits apart (near-ties would make goldens fragile)
        for pname, p in model.named_parameters():
            if p.dim() > 1 or pname.endswith("bias"):
                p.normal_(0, 0.1)
            else:  # norm scales (Gemma's are 1 + w: around 1 either way)
                p.add_(torch.empty_like(p).uniform_(-0.2, 0.2))
    return model.eval()


def exact_oracle(model, copy):
    """The model ORT should run as the reference: MatMulNBits with accuracy_level 4 (the genai builder's
    default for CPU) makes ORT quantize activations to int8 per block, which is not the product the file
    states; the oracle runs a copy at accuracy_level 0 (fp32 activations). And MatMulInteger over int8 weights
    runs on x86 without VNNI through vpmaddubsw, whose int16 pair sums saturate: the oracle's copy holds those
    weights and zero points as uint8, 128 higher — the same differences b − zp, summed exactly."""
    m = onnx.load(str(model))
    changed = False
    inits = {i.name: i for i in m.graph.initializer}

    def all_nodes(g):  # (a merged decoder's are inside its If's branches)
        for n in g.node:
            yield n
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    inits.update({i.name: i for i in a.g.initializer})
                    yield from all_nodes(a.g)

    for n in all_nodes(m.graph):
        for a in n.attribute:
            if n.op_type == "MatMulNBits" and a.name == "accuracy_level" and a.i != 0:
                a.i, changed = 0, True
        if n.op_type == "MatMulInteger" and n.input[1] in inits and inits[n.input[1]].data_type == onnx.TensorProto.INT8:
            for name in n.input[1::2]:  # B and its zero point
                t = inits[name]
                if t.data_type == onnx.TensorProto.INT8:
                    shifted = (numpy_helper.to_array(t).astype(np.int16) + 128).astype(np.uint8)
                    t.CopyFrom(numpy_helper.from_array(shifted, name))
            changed = True
    if not changed:
        return str(model)
    onnx.save(m, str(copy))
    return str(copy)


def make_cell(arch, cfg, exporter, out_root, work):
    name = f"{arch}-{exporter}"
    out_dir = out_root / name
    model_dir = work / arch
    if not model_dir.exists():
        random_model(cfg).save_pretrained(model_dir)
        byte_tokenizer(cfg).save_pretrained(model_dir)
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    try:
        if exporter in ("torchscript", "dynamo"):
            export_torch(model_dir, out_dir, exporter == "dynamo")
        elif exporter == "optimum" or exporter.startswith(("ort-", "tjs-", "merged")):
            if exporter.endswith("merged"):
                export_merged(model_dir, out_dir)
            else:
                export_optimum(model_dir, out_dir)
            if exporter == "ort-int4":
                quantize_ort_int4(out_dir)
            elif exporter == "tjs-bnb4":
                quantize_tjs_bnb4(out_dir)
            elif exporter in ("tjs-q4", "tjs-fp16", "tjs-q4f16"):
                if exporter != "tjs-fp16":
                    quantize_tjs_q4(out_dir)
                if exporter != "tjs-q4":
                    convert_tjs_fp16(out_dir)
            elif exporter.startswith("tjs-"):
                quantize_tjs_q8(out_dir, "QInt8" if exporter.startswith("tjs-q8") else "QUInt8")
        else:
            export_genai(model_dir, out_dir, exporter.split("-")[1])
        single_file(out_dir)
    except Exception as e:  # the exporter lacks the architecture: reported, no cell
        shutil.rmtree(out_dir, ignore_errors=True)
        return f"{name}: not exported ({type(e).__name__}: {str(e).strip().splitlines()[-1][:160] if str(e).strip() else ''})"
    for f in ("config.json", "generation_config.json", "tokenizer.json"):
        if (model_dir / f).exists() and not (out_dir / f).exists():
            shutil.copy(model_dir / f, out_dir / f)
    genai = exporter.startswith("genai")
    eos = [cfg.eos_token_id]
    oracle = exact_oracle(out_dir / "model.onnx", work / f"{name}-oracle.onnx")
    kv_dims = (getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads, head_dim(cfg))

    # ORT runs GroupQueryAttention with sliding_window_cache only on prompts of one length ("seqlens_k[1] = 4 is too
    # small for sequence_length 8", whichever side is padded): those cells' batch is of equal lengths.
    window_buffers = any(n.op_type == "GroupQueryAttention" and any(a.name == "sliding_window_cache" and a.i for a in n.attribute)
                         for n in onnx.load(str(out_dir / "model.onnx"), load_external_data=False).graph.node)
    batch = [PROMPTS[0], PROMPTS[0][::-1]] if window_buffers else PROMPTS

    def golden_cases(model, gaps_kept):
        cases = []
        for prompts in ([PROMPTS[0]], batch):
            tokens, prefill, gaps = ort_greedy(model, prompts, eos, kv_dims, right_pad=genai, window=getattr(cfg, "sliding_window", None))
            cases.append({"prompts": prompts, "tokens": tokens, "prefill_logits": np.round(prefill, 6).tolist()})
            if gaps_kept:
                cases[-1]["top2_gaps"] = np.round(gaps, 6).tolist()
        return cases

    try:
        cases = golden_cases(oracle, exporter in ("tjs-fp16", "tjs-q4f16"))
    except Exception as e:  # (the genai builder's sliding-window cache for Gemma: ORT needs its static buffers fed)
        shutil.rmtree(out_dir, ignore_errors=True)
        return f"{name}: no goldens (ONNX Runtime: {type(e).__name__}: {str(e).strip().splitlines()[-1][:200]})"
    golden = {"exporter": exporter, "arch": arch, "max_new_tokens": NEW_TOKENS, "eos": eos, "cases": cases,
              "oracle": ("int8 weights as uint8" if exporter.startswith("tjs-q8") else "accuracy_level 0") if oracle != str(out_dir / "model.onnx")
              else "as exported",
              "made_with": {"onnxruntime": ort.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
                            **({"onnxruntime-genai": importlib.metadata.version("onnxruntime-genai")} if genai else {})}}
    if exporter == "genai-int4":  # also ORT on the file as exported: int8 activations per block (accuracy_level 4)
        golden["accuracy_level_4"] = golden_cases(str(out_dir / "model.onnx"), True)
    (out_dir / "greedy.json").write_text(json.dumps(golden, separators=(",", ":")) + "\n")
    size = sum(f.stat().st_size for f in out_dir.iterdir())
    return f"{name}: {size / 1024:.0f} KiB"


def needs_optimum(exporter):
    return exporter in ("optimum", "ort-int4") or exporter.startswith(("tjs-", "merged"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "exports"))
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    only = [s for s in args.only.split(",") if s]
    out_root = Path(args.out)
    optimum_venv = int(transformers.__version__.split(".")[0]) < 5  # (optimum-onnx's limit: below 4.58)
    with tempfile.TemporaryDirectory() as tmp:
        for arch, cfg in arch_configs().items():
            for exporter in EXPORTERS:
                if only and arch not in only and f"{arch}-{exporter}" not in only:
                    continue
                if exporter not in ARCH_ONLY.get(arch, (exporter,)) or arch not in ARCH_ONLY and arch not in ONLY_FOR.get(exporter, (arch,)):
                    continue
                if needs_optimum(exporter) != optimum_venv:
                    if only:
                        print(f"{arch}-{exporter}: skipped (made in the {'Optimum' if needs_optimum(exporter) else 'current'} venv: "
                              "tools/exporters/setup_venv.sh)")
                    continue
                if exporter in ("tjs-fp16", "tjs-q4f16") and "TJS_SCRIPTS" not in os.environ:
                    print(f"{arch}-{exporter}: skipped (TJS_SCRIPTS names no transformers.js scripts folder)")
                    continue
                print(make_cell(arch, cfg, exporter, out_root, Path(tmp)), flush=True)


if __name__ == "__main__":
    main()
