#!/usr/bin/env python3
"""Writes tests/fixtures/gguf_arch/<arch>/{model.gguf, expected.json}: for each architecture tern's GGUF importer
knows, a tiny random-weight model made by transformers from its config class, written as llama.cpp's
convert_hf_to_gguf writes that architecture (tensor and key names from the `gguf` package, F16 matrices, F32 norms,
Q/K rows permuted for llama's interleaved RoPE, Gemma's norms stored as 1 + w, Gemma's SentencePiece vocabulary
with scores and byte tokens), and transformers' own results on the F16-rounded weights: the
prompt's last-position logits and up to 16 greedy tokens (EOS ends them) — the oracle of tests/test_gguf_architectures.cpp.
Run from the tools venv:  ~/.cache/tern/venv/bin/python tools/exporters/make_gguf_arch_fixtures.py
"""
import json
import pathlib
import sys

import gguf
import numpy as np
import torch
import transformers as tf
from gguf import MODEL_TENSOR as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from make_bench_gguf import byte_symbols  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests/fixtures/gguf_arch"
SHAPE = dict(vocab_size=260, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6, rope_theta=10000.0,
             initializer_range=0.15, bos_token_id=258, eos_token_id=259)
# arch: (config class, model class, config overrides, whether llama.cpp permutes Q/K rows)
ARCHS = {
    "llama": (tf.LlamaConfig, tf.LlamaForCausalLM, dict(tie_word_embeddings=False), True),
    "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM, dict(tie_word_embeddings=True, use_sliding_window=False), False),
    "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM, dict(tie_word_embeddings=False, head_dim=24, rope_theta=1e6), False),
    # Fused qkv and gate_up, written as llama.cpp's converter writes them (attn_qkv, ffn_up).
    # Mistral 7B v0.1's layout as llama.cpp's converter writes it (architecture "llama", Q/K permuted) with
    # llama.attention.sliding_window: every layer windowed to 8 keys, which the 12 + 16 tokens run past.
    "mistral": (tf.MistralConfig, tf.MistralForCausalLM,
                dict(tie_word_embeddings=False, sliding_window=8, attn_implementation="eager"), True),
    "phi3": (tf.Phi3Config, tf.Phi3ForCausalLM, dict(tie_word_embeddings=False, pad_token_id=0, rope_scaling=None), False),
    # Two layers: a sliding window of 8 keys, then global; soft-caps small enough to bite on random weights.
    "gemma2": (tf.Gemma2Config, tf.Gemma2ForCausalLM,
               dict(tie_word_embeddings=True, vocab_size=263, bos_token_id=2, eos_token_id=1, pad_token_id=0,
                    head_dim=16, query_pre_attn_scalar=16, sliding_window=8, attn_logit_softcapping=2.0,
                    final_logit_softcapping=3.0, hidden_activation="gelu_pytorch_tanh", attn_implementation="eager"),
               False),
    # Six layers: five with a sliding window of 8 keys (RoPE base 10^4), the sixth global (10^6), as llama.cpp
    # reads Gemma 3; 12 prompt + 16 new tokens run well past the window.
    "gemma3": (tf.Gemma3TextConfig, tf.Gemma3ForCausalLM,
               dict(tie_word_embeddings=True, vocab_size=263, bos_token_id=2, eos_token_id=1, pad_token_id=0,
                    num_hidden_layers=6, head_dim=16, query_pre_attn_scalar=16, sliding_window=8, rope_theta=1e6,
                    rope_local_base_freq=10000.0, hidden_activation="gelu_pytorch_tanh", attn_implementation="eager"),
               False),
    # RoPE scaling as the three kinds reach GGUF files: linear (rope.scaling.type/factor), Llama 3.1's
    # (llama.cpp's converter writes no type but a rope_freqs tensor, one divisor per frequency) and YaRN
    # (factor, original context) — an original context of 64 against 256, so every kind moves the
    # frequencies the 28 positions use.
    "llama-rope-linear": (tf.LlamaConfig, tf.LlamaForCausalLM,
                          dict(tie_word_embeddings=False, rope_scaling=dict(rope_type="linear", factor=4.0)), True),
    "llama-rope-llama3": (tf.LlamaConfig, tf.LlamaForCausalLM,
                          dict(tie_word_embeddings=False,
                               rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                                 original_max_position_embeddings=64)), True),
    "qwen2-rope-yarn": (tf.Qwen2Config, tf.Qwen2ForCausalLM,
                        dict(tie_word_embeddings=True, use_sliding_window=False,
                             rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64)), False),
}
GGUF_ARCH = {"mistral": "llama", "llama-rope-linear": "llama", "llama-rope-llama3": "llama", "qwen2-rope-yarn": "qwen2"}  # fixture folder → the GGUF's general.architecture, where they differ
MERGES = ["Ġ t", "h e"]
PROMPT = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100]
NEW_TOKENS = 16


def byte_vocab():
    """GPT-2's byte-level alphabet (tools/make_bench_gguf.py's), two merges, then BOS and EOS."""
    return byte_symbols() + [m.replace(" ", "") for m in MERGES] + ["<s>", "</s>"]


def sentencepiece_vocab():
    """Gemma's layout: pad, eos, bos, unk; the 256 byte tokens; three normal pieces ("▁t" merges "▁" and "t")."""
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<0x{b:02X}>" for b in range(256)] + ["\u2581", "t", "\u2581t"]
    types = [gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.UNKNOWN] + [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * 3
    scores = [0.0] * 260 + [-1.0, -2.0, -3.0]
    return tokens, types, scores


def permute(w, heads):
    """llama.cpp's row order for llama's Q and K: each head's halves interleaved, so RoPE rotates pairs (2i, 2i+1)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def make(arch, seed):
    config_class, model_class, overrides, permuted = ARCHS[arch]
    torch.manual_seed(seed)
    config = config_class(**{**SHAPE, **overrides})
    model = model_class(config).eval()
    with torch.no_grad():  # norms away from 1 so a misplaced one shows; matrices rounded to what the file holds
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):  # (Gemma's scale by 1 + w)
                p.copy_((0 if arch.startswith("gemma") else 1) + 0.2 * torch.randn_like(p))
            elif p.dim() == 2:
                p.copy_(p.half().float())
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        logits = model(ids).logits[0, -1]
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS, do_sample=False,
                             output_scores=True, return_dict_in_generate=True, pad_token_id=config.eos_token_id)
    # Greedy ties would make the test a coin toss: every step's best logit leads the next by > 1e-2.
    margin = min(float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in out.scores)
    return model, config, permuted, logits, out.sequences[0].tolist(), margin


def write_rope_scaling(w, config, head):
    """rope_scaling as llama.cpp's convert_hf_to_gguf writes it."""
    rope = getattr(config, "rope_scaling", None) or {}
    kind = rope.get("rope_type") or rope.get("type")
    if kind == "linear":
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(rope["factor"])
    elif kind == "yarn":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    elif kind == "llama3":  # its generate_extra_tensors: one divisor per frequency
        base, factor = config.rope_theta, rope["factor"]
        low_wavelen = rope["original_max_position_embeddings"] / rope["low_freq_factor"]
        high_wavelen = rope["original_max_position_embeddings"] / rope["high_freq_factor"]
        divisors = []
        for i in range(0, head, 2):
            wavelen = 2 * np.pi / (1.0 / base ** (i / head))
            if wavelen < high_wavelen:
                divisors.append(1.0)
            elif wavelen > low_wavelen:
                divisors.append(factor)
            else:
                smooth = (rope["original_max_position_embeddings"] / wavelen - rope["low_freq_factor"]) / (
                    rope["high_freq_factor"] - rope["low_freq_factor"])
                divisors.append(1 / ((1 - smooth) / factor + smooth))
        w.add_tensor(gguf.TENSOR_NAMES[T.ROPE_FREQS] + ".weight", np.array(divisors, dtype=np.float32))
    elif kind not in (None, "default"):
        raise SystemExit(f"rope_scaling {kind}: not written by this script")


def write(arch, model, config, permuted, logits, tokens):
    d = OUT / arch
    d.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(d / "model.gguf"), GGUF_ARCH.get(arch, arch))
    w.add_name(f"tern-{arch}-random")
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_block_count(config.num_hidden_layers)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_attention_heads)
    w.add_head_count_kv(config.num_key_value_heads)
    w.add_layer_norm_rms_eps(config.rms_norm_eps)
    w.add_rope_freq_base(config.rope_theta)
    head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if head != config.hidden_size // config.num_attention_heads:
        w.add_key_length(head)
        w.add_value_length(head)
    gemma = arch.startswith("gemma")
    write_rope_scaling(w, config, head)
    if arch == "gemma2":
        w.add_attn_logit_softcapping(config.attn_logit_softcapping)
        w.add_final_logit_softcapping(config.final_logit_softcapping)
    if gemma or arch == "mistral":
        w.add_sliding_window(config.sliding_window)
    if gemma:
        pieces, types, scores = sentencepiece_vocab()
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(pieces)
        w.add_token_types(types)
        w.add_token_scores(scores)
        w.add_add_bos_token(True)
        w.add_add_space_prefix(False)
    else:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list(byte_vocab())
        w.add_token_types([gguf.TokenType.NORMAL] * (256 + len(MERGES)) + [gguf.TokenType.CONTROL] * 2)
        w.add_token_merges(MERGES)
    w.add_bos_token_id(config.bos_token_id)
    w.add_eos_token_id(config.eos_token_id)

    names = {"embed_tokens": T.TOKEN_EMBD, "norm": T.OUTPUT_NORM, "lm_head": T.OUTPUT, "input_layernorm": T.ATTN_NORM,
             "post_attention_layernorm": T.FFN_NORM, "q_proj": T.ATTN_Q, "k_proj": T.ATTN_K, "v_proj": T.ATTN_V,
             "o_proj": T.ATTN_OUT, "q_norm": T.ATTN_Q_NORM, "k_norm": T.ATTN_K_NORM, "gate_proj": T.FFN_GATE,
             "up_proj": T.FFN_UP, "down_proj": T.FFN_DOWN, "qkv_proj": T.ATTN_QKV, "gate_up_proj": T.FFN_UP}
    if gemma:  # Gemma's four norms per layer
        names.update({"post_attention_layernorm": T.ATTN_POST_NORM, "pre_feedforward_layernorm": T.FFN_NORM,
                      "post_feedforward_layernorm": T.FFN_POST_NORM})
    for name, p in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        parts = name.split(".")
        block = int(parts[2]) if parts[1] == "layers" else None
        gguf_name = gguf.TENSOR_NAMES[names[parts[-2]]].format(bid=block) + "." + parts[-1]
        data = p.numpy()
        if gemma and parts[-2].endswith("norm"):  # Gemma's RMSNorm scales by 1 + w: llama.cpp's converter stores 1 + w
            data = data + 1
        if permuted and parts[-2] in ("q_proj", "k_proj"):
            data = permute(data, config.num_attention_heads if parts[-2] == "q_proj" else config.num_key_value_heads)
        w.add_tensor(gguf_name, data.astype(np.float16 if data.ndim == 2 else np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    (d / "expected.json").write_text(json.dumps({
        "source": f"transformers {tf.__version__} {type(model).__name__}, tools/exporters/make_gguf_arch_fixtures.py",
        "prompt": PROMPT, "last_logits": [round(float(v), 7) for v in logits], "tokens": tokens}) + "\n")
    return d / "model.gguf"


def main():
    for arch in sys.argv[1:] or ARCHS:
        for seed in range(100):
            model, config, permuted, logits, tokens, margin = make(arch, seed)
            if margin > 1e-2:
                break
        path = write(arch, model, config, permuted, logits, tokens)
        print(f"{arch}: seed {seed}, greedy margin {margin:.3g}, {path.stat().st_size} bytes, tokens {tokens[len(PROMPT):]}")
        if arch in ("llama", "qwen2"):  # (mistral's window: transformers' GGUF reader drops it)  # transformers' GGUF loader ignores key_length (qwen3, gemma3 head sizes)
            read_back(path, logits)


def read_back(path, logits):
    """transformers' own GGUF reader (its de-permutation, its names) gives the same logits: the file is written as
    llama.cpp's converter writes it."""
    model = tf.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    with torch.no_grad():
        diff = float((model(torch.tensor([PROMPT])).logits[0, -1] - logits).abs().max())
    assert diff < 1e-5, f"{path}: transformers reads it back {diff} away"
    print(f"  transformers reads {path.name} back: logits within {diff:.2g}")


if __name__ == "__main__":
    main()
