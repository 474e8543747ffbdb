#!/usr/bin/env python3
"""ONNX Runtime as the oracle for a folder `tern import-gguf` wrote: greedy continuations (32 new tokens, no
cache: the whole sequence each step) of ten plain-text prompts in ORT, compared token by token with
`tern generate --greedy` on the same folder and prompt ids. Run from the tools venv (setup_venv.sh):
  ~/.cache/tern/venv/bin/python tools/exporters/gguf_greedy_vs_ort.py models/smollm2-135m-instruct [build/tern [TERN_FLAG...]]
(extra flags go to tern generate, e.g. --activations fp32 to leave decode's activations unquantized.)
"""
import json
import subprocess
import sys

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

PROMPTS = ["The capital of France is", "Once upon a time, there was a", "def fibonacci(n):", "The three primary colors are",
           "In 1969, Neil Armstrong", "To make a cup of tea, first", "The largest planet in the solar system is",
           "Python is a programming language that", "Water boils at", "My favorite book is"]


def main():
    folder, tern, flags = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "build/tern", sys.argv[3:]
    config = json.load(open(f"{folder}/config.json"))
    tok = Tokenizer.from_file(f"{folder}/tokenizer.json")
    session = ort.InferenceSession(f"{folder}/model.onnx", providers=["CPUExecutionProvider"])
    kv = config["num_key_value_heads"]
    head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    same = 0
    for prompt in PROMPTS:
        ids = tok.encode(prompt).ids  # (BOS first where the GGUF asks for it: Gemma)
        seq = list(ids)
        for _ in range(32):
            x = np.array([seq], np.int64)
            feeds = {"input_ids": x, "attention_mask": np.ones_like(x), "position_ids": np.arange(x.shape[1])[None]}
            for i in session.get_inputs():
                if i.name.startswith("past"):
                    feeds[i.name] = np.zeros((1, kv, 0, head), np.float32)
            seq.append(int(session.run(["logits"], feeds)[0][0, -1].argmax()))
            if seq[-1] == config["eos_token_id"]:
                break
        out = subprocess.run([tern, "generate", "--model", folder, "--ids", ",".join(map(str, ids)), "--max-new-tokens", "32",
                              "--greedy", "--threads", "2", "--json", *flags], capture_output=True, text=True, check=True).stdout
        got = json.loads(out)["tokens"][0]
        same += got == seq
        print(f"{'same' if got == seq else 'DIFFERENT'}  {prompt!r} → {tok.decode(seq[len(ids):])!r}")
    print(f"{same}/{len(PROMPTS)} prompts: tern's greedy tokens equal ONNX Runtime's on {folder}")


if __name__ == "__main__":
    main()
