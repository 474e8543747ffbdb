#!/usr/bin/env python3
"""Load time and peak RSS of one single-file model (weights inside model.onnx): tern bench's load_s and
peak_rss_gb for each tern binary given, against ONNX Runtime's session creation (2 intra-op threads, its
process's peak RSS), alternated round by round, medians printed.
    python3 bench/single_file_load.py MODEL_DIR ROUNDS TERN [TERN...]   (Python with onnxruntime)"""
import json
import statistics
import subprocess
import sys

ORT = """
import resource, sys, time, onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads = 2
t = time.perf_counter(); ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9)
"""


def tern(binary, model):
    out = subprocess.run([binary, "bench", "--model", model, "--prompt-tokens", "8", "--new-tokens", "2", "--json", "--threads", "2"],
                         capture_output=True, text=True, check=True).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return j["load_s"], j["peak_rss_gb"]


def ort(model):
    out = subprocess.run([sys.executable, "-c", ORT, model + "/model.onnx"], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main():
    model, rounds, binaries = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    runs = {name: [] for name in ["onnxruntime"] + binaries}
    for _ in range(rounds):
        runs["onnxruntime"].append(ort(model))
        for b in binaries:
            runs[b].append(tern(b, model))
    for name, v in runs.items():
        load, peak = statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)
        print(f"{name}: load {load:.2f} s, peak RSS {peak:.3f} GB (runs: {[round(x[0], 2) for x in v]} s, {[round(x[1], 3) for x in v]} GB)")


if __name__ == "__main__":
    main()
