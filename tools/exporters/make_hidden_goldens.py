#!/usr/bin/env python3
"""Goldens for decoder embeddings: each architecture of the exporter matrix (make_exports.py) rebuilt in
transformers with the cells' seed and weights, and its final hidden state — `output_hidden_states`' last entry,
the final norm's output that the vocabulary projection reads — at every position of two prompts.

    $(tools/exporters/setup_venv.sh) tools/exporters/make_hidden_goldens.py [--out tests/fixtures/exports/hidden_states.json]

The rebuilt model is checked against the cells first: its last-position logits must equal the ONNX Runtime
prefill logits in the optimum (else dynamo) cell's greedy.json within 1e-4, or the architecture is left out
(reported) — so the goldens belong to the committed models. Where eager attention computes otherwise than SDPA
(Gemma-2's attention soft-capping, which SDPA leaves out), both are kept. `cells` names, for each cell whose prefill
logits are the rebuilt model's within 1e-4, the hidden state that holds for it; the others (quantized cells, and
the genai builder's Gemma and Phi-2 graphs, which compute otherwise) are left out, with their distance reported.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_exports import PROMPTS, arch_configs, random_model  # noqa: E402

EXPORTS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "exports"


def hidden_states(model):
    """The final hidden state at every position of each prompt, run alone."""
    out = []
    for prompt in PROMPTS:
        with torch.no_grad():
            h = model(torch.tensor([prompt]), output_hidden_states=True).hidden_states[-1][0]
        out.append(np.round(h.numpy().astype(np.float64), 7).tolist())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(EXPORTS / "hidden_states.json"))
    args = ap.parse_args()
    goldens, cells = {}, {}
    for arch, cfg in arch_configs().items():
        model = random_model(cfg)
        candidates = [EXPORTS / f"{arch}-{e}" / "greedy.json" for e in ("optimum", "dynamo", "torchscript")]
        cell = next((c for c in candidates if c.exists()), None)
        if cell is None:
            print(f"{arch}: no fp32 cell to check against, left out")
            continue
        case = json.loads(cell.read_text())["cases"][0]
        with torch.no_grad():
            out = model(torch.tensor(case["prompts"]), output_hidden_states=True)
        diff = float(np.abs(out.logits[:, -1].numpy() - np.array(case["prefill_logits"])).max())
        if diff > 1e-4:
            print(f"{arch}: the rebuilt model's logits differ from {cell.parent.name}'s by {diff:.2e}, left out")
            continue
        eager = random_model(cfg, "eager")
        golden = {"prompts": PROMPTS, "last_hidden_state": hidden_states(model)}
        eager_hidden = hidden_states(eager)
        gap = max(float(np.abs(np.array(a) - np.array(b)).max()) for a, b in zip(golden["last_hidden_state"], eager_hidden))
        if gap > 1e-5:
            golden["eager_last_hidden_state"] = eager_hidden
        # The cells these goldens hold for: those whose prefill logits are the rebuilt model's (SDPA or eager).
        for c in sorted(EXPORTS.glob(f"{arch}-*/greedy.json")):
            first = json.loads(c.read_text())["cases"][0]
            logits = np.array(first["prefill_logits"])
            for variant, m in (("last_hidden_state", model), ("eager_last_hidden_state", eager)):
                with torch.no_grad():
                    d = float(np.abs(m(torch.tensor(first["prompts"])).logits[:, -1].numpy() - logits).max())
                if d < 1e-4 and (variant in golden):
                    cells[c.parent.name] = variant
                    break
            else:
                print(f"  {c.parent.name}: its logits are not transformers' ({d:.1e} from the eager model's), left out")
        goldens[arch] = golden
        print(f"{arch}: logits as {cell.parent.name} within {diff:.1e}; eager attention differs by {gap:.1e}")
    Path(args.out).write_text(json.dumps({"made_with": {"torch": torch.__version__,
                                                        "transformers": __import__("transformers").__version__},
                                          "archs": goldens, "cells": cells}, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
