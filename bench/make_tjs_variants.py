#!/usr/bin/env python3
"""transformers.js's variants of one random-weight Llama, for bench/vs_ort.sh: the Optimum fp32 export and what
transformers.js's scripts/quantize.py writes from it (q8, q4, fp16, q4f16, bnb4), each in a folder of its own with
config.json, made by the exporter matrix's own functions (tools/exporters/make_exports.py; fp16 and q4f16 need
transformers.js's scripts folder in $TJS_SCRIPTS, as there). Weights are make_exports.random_model's.

    $(tools/exporters/setup_venv.sh) bench/make_tjs_variants.py --shape 1b --out /tmp/tjs-1b [--only q8,fp16]

Shapes: 1b = Llama-3.2-1B (hidden 2048, 16 layers, 32 heads, 8 KV heads, FFN 8192, vocab 128256, tied embeddings);
smollm2 = SmolLM2-135M (hidden 576, 30 layers, 9 heads, 3 KV heads, FFN 1536, vocab 49152, tied). A file past
protobuf's 2 GB keeps its tensors in model.onnx_data beside it, as Optimum's export does; the 1b export skips Optimum's
post-processing, which cannot serialize it (its LM head then a weight of its own, not the embedding table's).
"""
import argparse
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "exporters"))
import make_exports as me  # noqa: E402
import transformers  # noqa: E402

SHAPES = {
    "1b": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
               num_key_value_heads=8, max_position_embeddings=4096, tie_word_embeddings=True, rope_theta=500000.0),
    "smollm2": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, max_position_embeddings=2048, tie_word_embeddings=True, rope_theta=100000.0),
}
VARIANTS = {
    "q8": lambda d: me.quantize_tjs_q8(d, "QInt8"),
    "q4": me.quantize_tjs_q4,
    "fp16": me.convert_tjs_fp16,
    "q4f16": lambda d: (me.quantize_tjs_q4(d), me.convert_tjs_fp16(d)),
    "bnb4": me.quantize_tjs_bnb4,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="variants, comma-separated (default: all)")
    args = ap.parse_args()
    out = Path(args.out)
    src, fp32 = out / "src", out / "fp32"
    if not (fp32 / "model.onnx").exists():
        cfg = transformers.LlamaConfig(**SHAPES[args.shape], bos_token_id=1, eos_token_id=2)
        me.random_model(cfg).save_pretrained(src)
        fp32.mkdir(parents=True, exist_ok=True)
        me.export_optimum(src, fp32, post_process=args.shape != "1b")
        shutil.rmtree(src)
        print("fp32 done", flush=True)
    for name in [v for v in args.only.split(",") if v] or list(VARIANTS):
        if name in ("fp16", "q4f16") and "TJS_SCRIPTS" not in os.environ:
            print(f"{name}: skipped (TJS_SCRIPTS names no transformers.js scripts folder)")
            continue
        d = out / name
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(fp32, d)
        VARIANTS[name](d)
        print(name, "done", flush=True)


if __name__ == "__main__":
    main()
