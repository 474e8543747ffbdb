#!/usr/bin/env python3
"""Trains tern's default model: a small Llama (RMSNorm, RoPE, SwiGLU, grouped-query attention) on the King
James Bible as Debian's bible-kjv package ships it (public domain), with a byte-level BPE tokenizer trained
here, and writes models/default/: model.onnx (torch.onnx.export, Optimum layout), config.json,
generation_config.json, tokenizer.json, tokenizer_config.json, loss.png and train_log.json.

    apt-get install bible-kjv python3-torch python3-onnx python3-numpy python3-matplotlib libopenblas0-pthread
    /usr/bin/python3 tools/train_default_model.py [--steps 1000] [--out models/default]

Seeded (torch, numpy, data order); about 30 minutes on 2 cores (with OpenBLAS: Debian's torch falls
back to the reference BLAS without it, ten times slower). The validation split is the last 5% of
the chapters (the end of the New Testament), never trained on.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from torch_llama import Llama, LlamaShape, export_optimum, write_configs  # noqa: E402

SHAPE = LlamaShape(vocab=1024, hidden=192, layers=5, heads=6, kv_heads=2, ffn=512, max_positions=256, tied=True)
EOT = "<|endoftext|>"  # id 0: begins every text (BOS) and ends it (EOS)
# GPT-2's pre-tokenizer split written for ASCII text (the KJV is ASCII); tokenizer.json declares the real
# GPT-2 ByteLevel regex, which splits ASCII the same way.
SPLIT = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")


def bytes_to_unicode():
    """GPT-2's map from bytes to printable characters (the ByteLevel alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def kjv_chapters():
    """The KJV as chapters: 'Genesis 1' then the verses as one paragraph each, verse numbers dropped."""
    raw = subprocess.run(["bible", "gen1:1-rev22:21"], capture_output=True, text=True, check=True).stdout
    chapters, title, verses = [], None, []
    for line in raw.splitlines():
        s = line.strip()
        if not s:
            continue
        m = re.match(r"^(\d+) (.*)$", s)
        if not line.startswith(" ") and re.match(r"^[1-3]? ?[A-Z][A-Za-z ]+ \d+$", s):  # "1 Samuel 3"
            if title is not None:
                chapters.append(title + "\n\n" + "\n".join(verses) + "\n")
            title, verses = s, []
        elif m and title is not None and line.startswith("  "):
            verses.append(m.group(2))
        elif verses:
            verses[-1] += " " + s  # a verse wrapped onto the next line
    chapters.append(title + "\n\n" + "\n".join(verses) + "\n")
    return chapters


def train_bpe(texts, vocab_size):
    """Byte-level BPE: merges learned over the pre-tokenized words' frequencies."""
    b2u = bytes_to_unicode()
    words = Counter()
    for t in texts:
        for w in SPLIT.findall(t):
            words["".join(b2u[b] for b in w.encode("utf-8"))] += 1
    seqs = {w: list(w) for w in words}
    merges = []
    n_merges = vocab_size - 1 - 256
    while len(merges) < n_merges:
        pairs = Counter()
        for w, f in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[a, b] += f
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append((a, b))
        for w in words:
            s = seqs[w]
            if len(s) < 2:
                continue
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    vocab = {EOT: 0}
    for ch in sorted(b2u.values(), key=lambda c: [k for k, v in b2u.items() if v == c][0]):
        vocab[ch] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    return vocab, merges


class Encoder:
    def __init__(self, vocab, merges):
        self.vocab, self.rank = vocab, {m: i for i, m in enumerate(merges)}
        self.b2u, self.cache = bytes_to_unicode(), {}

    def word(self, w):
        if w in self.cache:
            return self.cache[w]
        s = [self.b2u[b] for b in w.encode("utf-8")]
        while len(s) > 1:
            best = min(((self.rank.get((x, y), 1 << 30), i) for i, (x, y) in enumerate(zip(s, s[1:]))))
            if best[0] == 1 << 30:
                break
            i = best[1]
            s = s[:i] + [s[i] + s[i + 1]] + s[i + 2:]
        ids = [self.vocab[t] for t in s]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        return [0] + [i for w in SPLIT.findall(text) for i in self.word(w)]


def tokenizer_json(vocab, merges):
    return {
        "version": "1.0",
        "added_tokens": [{"id": 0, "content": EOT, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": EOT, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": EOT, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {EOT: {"id": EOT, "ids": [0], "tokens": [EOT]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


def batches(tokens, seq, batch, rng):
    starts = rng.integers(0, len(tokens) - seq - 1, size=batch)
    x = np.stack([tokens[s:s + seq] for s in starts])
    y = np.stack([tokens[s + 1:s + seq + 1] for s in starts])
    return torch.from_numpy(x), torch.from_numpy(y)


def loss_on(model, x, y):
    B, S = x.shape
    past = [torch.zeros(B, SHAPE.kv_heads, 0, SHAPE.head_dim) for _ in range(2 * SHAPE.layers)]
    logits = model(x, torch.ones(B, S, dtype=torch.int64), torch.arange(S)[None].repeat(B, 1), *past)[0]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, SHAPE.vocab), y.reshape(-1))


def validation_loss(model, val, seq):
    """Mean next-token loss over the validation tokens cut into windows of `seq` tokens, every prediction
    inside a window scored — exactly what `tern eval --context seq` computes."""
    model.eval()
    total, count = 0.0, 0
    full = (len(val) // seq) * seq
    windows = [val[:full].reshape(-1, seq)] + ([val[full:][None]] if len(val) - full >= 2 else [])
    with torch.no_grad():
        for w in windows:
            for b in range(0, len(w), 32):  # 32 windows per forward
                x, y = torch.from_numpy(w[b:b + 32, :-1]), torch.from_numpy(w[b:b + 32, 1:])
                total += loss_on(model, x, y).item() * y.numel()
                count += y.numel()
    model.train()
    return total / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "models", "default"))
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    rng = np.random.default_rng(a.seed)
    t0 = time.time()

    chapters = kjv_chapters()
    split = int(len(chapters) * 0.95)
    train_text, val_text = "\n".join(chapters[:split]), "\n".join(chapters[split:])
    vocab, merges = train_bpe([train_text], SHAPE.vocab)
    enc = Encoder(vocab, merges)
    train = np.array(enc.encode(train_text), dtype=np.int64)
    val = np.array(enc.encode(val_text), dtype=np.int64)
    print(f"{len(chapters)} chapters; {len(train)} train / {len(val)} validation tokens; BPE {time.time() - t0:.0f} s", flush=True)

    model = Llama(SHAPE)
    with torch.no_grad():  # GPT-2's initialization: small weights, so the tied logits start near uniform
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = 100
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, a.steps) / a.steps))))
    log = {"params": params, "steps": [], "train_loss": [], "val_steps": [], "val_loss": []}
    for step in range(a.steps):
        x, y = batches(train, a.seq, a.batch, rng)
        loss = loss_on(model, x, y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        log["steps"].append(step)
        log["train_loss"].append(loss.item())
        if step % 100 == 0 or step == a.steps - 1:
            v = validation_loss(model, val, a.seq)
            log["val_steps"].append(step)
            log["val_loss"].append(v)
            print(f"step {step}: train {loss.item():.3f}, validation {v:.3f} ({time.time() - t0:.0f} s)", flush=True)
    log["minutes"] = (time.time() - t0) / 60
    model.eval()

    os.makedirs(a.out, exist_ok=True)
    write_configs(a.out, SHAPE, "tools/train_default_model.py (KJV, seed %d)" % a.seed, bos=0, eos=0)
    json.dump({"bos_token_id": 0, "eos_token_id": 0, "do_sample": True, "temperature": 0.8, "top_p": 0.95},
              open(os.path.join(a.out, "generation_config.json"), "w"), indent=1)
    json.dump(tokenizer_json(vocab, merges), open(os.path.join(a.out, "tokenizer.json"), "w"), ensure_ascii=False)
    json.dump({"bos_token": EOT, "eos_token": EOT, "model_max_length": SHAPE.max_positions,
               "tokenizer_class": "PreTrainedTokenizerFast"}, open(os.path.join(a.out, "tokenizer_config.json"), "w"), indent=1)
    export_optimum(model, os.path.join(a.out, "model.onnx"))
    with open(os.path.join(a.out, "validation.txt"), "w") as f:  # what `tern eval` reproduces the loss on
        f.write(val_text)
    json.dump(log, open(os.path.join(a.out, "train_log.json"), "w"))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    k = 25
    smooth = np.convolve(log["train_loss"], np.ones(k) / k, mode="valid")
    plt.figure(figsize=(6, 3.5), dpi=100)
    plt.plot(np.arange(len(smooth)) + k - 1, smooth, label="train (25-step mean)")
    plt.plot(log["val_steps"], log["val_loss"], "o-", label="validation")
    plt.xlabel("step")
    plt.ylabel("cross-entropy (nats/token)")
    plt.title(f"tern default model: {params / 1e6:.2f} M parameters, KJV")
    plt.legend()
    plt.tight_layout()
    plt.savefig(os.path.join(a.out, "loss.png"))
    print(f"wrote {a.out}: {params} parameters, validation loss {log['val_loss'][-1]:.4f}, {log['minutes']:.1f} min")


if __name__ == "__main__":
    main()
