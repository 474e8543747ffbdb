#!/usr/bin/env python3
"""tern and ONNX Runtime decoding the same file in one process, in turn, many rounds: each round's two generations run
seconds apart, so a ratio compares them under the same memory bandwidth. On the 2-vCPU VMs the bandwidth moves
between two levels from one run to the next (tern's q8 decode of the 1B shape 30-50 tok/s with its build unchanged),
and runs in separate processes, each loading for seconds, pair a fast level with a slow one as often as not.

    $(tools/exporters/setup_venv.sh) bench/paired_decode.py MODEL_DIR [--prompt-tokens 64] [--new-tokens 32]
        [--threads 2] [--rounds 9] [--pause 1] [--dtype D]

tern: build/libtern.so (TERN_LIBRARY to name another) through python/tern's genai API, the ring KV cache, greedy.
ONNX Runtime: onnxruntime's InferenceSession on MODEL_DIR/model.onnx (or onnx/model_<dtype>.onnx), graph optimizations
on, intra-op threads as tern's, its presents fed back as the next step's pasts as OrtValues (no copies), greedy.
The prompt is `tern bench`'s synthetic one (id 1 + i·7919 mod (vocab − 1)); decode tok/s counts the steps after the
first token. Prints each round and the medians: tern's, ONNX Runtime's and the per-round ratio's.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

root = Path(__file__).resolve().parents[1]
os.environ.setdefault("TERN_LIBRARY", str(root / "build" / "libtern.so"))
sys.path.insert(0, str(root / "python"))
import tern.genai as tg  # noqa: E402


def tern_decode(model, ids, new):
    params = tg.GeneratorParams(model)
    params.set_search_options(max_length=len(ids) + new, do_sample=False)  # (min_length would round-trip the logits)
    gen = tg.Generator(model, params)
    gen.append_tokens(ids)
    gen.generate_next_token()  # the prompt's token: prefill's
    t0, steps = time.perf_counter(), 0
    while not gen.is_done():
        gen.generate_next_token()
        steps += 1
    return steps / (time.perf_counter() - t0)


class OrtDecoder:
    def __init__(self, path, threads):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        self.inputs = {i.name: i for i in self.session.get_inputs()}
        self.pasts = [n for n in self.inputs if n.startswith("past_key_values.")]
        self.outputs = [o.name for o in self.session.get_outputs()]
        if not self.pasts or any(isinstance(d, int) for n in self.pasts for d in self.inputs[n].shape[2:3]):
            sys.exit(f"{path}: ONNX Runtime's side needs past_key_values.* inputs with a dynamic length")

    def _ints(self, values):
        dtype = np.int32 if self.inputs["input_ids"].type == "tensor(int32)" else np.int64
        return ort.OrtValue.ortvalue_from_numpy(np.asarray([values], dtype=dtype))

    def decode(self, ids, new):
        fp16 = self.inputs[self.pasts[0]].type == "tensor(float16)"
        feeds = {}
        for n in self.pasts:
            _, heads, _, size = self.inputs[n].shape
            feeds[n] = ort.OrtValue.ortvalue_from_numpy(np.zeros((1, heads, 0, size), np.float16 if fp16 else np.float32))
        seq, cached, t0 = list(ids), 0, None
        for step in range(new):
            feeds["input_ids"] = self._ints(seq[cached:])
            if "attention_mask" in self.inputs:
                feeds["attention_mask"] = self._ints([1] * len(seq))
            if "position_ids" in self.inputs:
                feeds["position_ids"] = self._ints(list(range(cached, len(seq))))
            out = dict(zip(self.outputs, self.session.run_with_ort_values(self.outputs, feeds)))
            seq.append(int(np.argmax(out["logits"].numpy()[0, -1])))
            cached = len(seq) - 1
            for n in self.pasts:
                feeds[n] = out["present." + n[len("past_key_values."):]]
            if step == 0:
                t0 = time.perf_counter()
        return (new - 1) / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between generations (idle threads go to sleep)")
    ap.add_argument("--dtype", default=None, help="an onnx-community repository's variant (as tern's --dtype)")
    args = ap.parse_args()
    d = Path(args.model)
    onnx = d / "onnx" / (f"model_{args.dtype}.onnx" if args.dtype and args.dtype != "fp32" else "model.onnx") \
        if (d / "onnx").is_dir() else d / "model.onnx"
    vocab = json.loads((d / "config.json").read_text())["vocab_size"]
    ids = [1 + i * 7919 % (vocab - 1) for i in range(args.prompt_tokens)]
    model = tg.Model(str(d), threads=args.threads, dtype=args.dtype)
    ortd = OrtDecoder(onnx, args.threads)
    print(f"{onnx}: prompt {args.prompt_tokens}, new {args.new_tokens}, {args.threads} threads, onnxruntime "
          f"{ort.__version__}, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores", flush=True)
    tern_decode(model, ids, 4)  # each side's first run pays its first touches
    ortd.decode(ids, 4)
    rows = []
    for r in range(args.rounds):
        time.sleep(args.pause)
        t = tern_decode(model, ids, args.new_tokens)
        time.sleep(args.pause)
        o = ortd.decode(ids, args.new_tokens)
        rows.append((t, o, t / o))
        print(f"round {r + 1}: tern {t:.2f} tok/s, onnxruntime {o:.2f} tok/s, tern / ORT {t / o:.2f}", flush=True)
    med = [statistics.median(c) for c in zip(*rows)]
    print(f"medians: tern {med[0]:.2f} tok/s, onnxruntime {med[1]:.2f} tok/s, tern / ORT (per round) {med[2]:.2f}")


if __name__ == "__main__":
    main()
