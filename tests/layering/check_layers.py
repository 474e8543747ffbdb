#!/usr/bin/env python3
"""The layers of src/ depend one way: each may include only itself and the layers before it,

    core -> graph -> kernels -> ops -> passes -> runtime -> llm -> convert -> diagnostics -> api
    (tools/ and tests/ may include any; convert and diagnostics are what a minimal build leaves out)

Prints every #include "..." under ROOT (default src/) that points the other way, and every file outside
a layer, and exits 1 if there is one. --self-test plants a back-edge in a scratch tree and checks it is
caught with its file, line and layers named (and that the same tree without it passes)."""
import pathlib
import re
import sys
import tempfile

LAYERS = ["core", "graph", "kernels", "ops", "passes", "runtime", "llm", "convert", "diagnostics", "api"]
INCLUDE = re.compile(r'\s*#\s*include\s*"([^"]+)"')


def violations(root):
    root = pathlib.Path(root)
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        layer = rel.parts[0] if len(rel.parts) > 1 else None
        if layer not in LAYERS:
            found.append(f"{rel}: outside every layer ({' -> '.join(LAYERS)})")
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            target = m.group(1).split("/")[0] if m else None
            if target in LAYERS and LAYERS.index(target) > LAYERS.index(layer):
                found.append(f"{rel}:{n} includes {m.group(1)}: {layer} may not depend on {target}")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / "core").mkdir()
        (root / "llm").mkdir()
        (root / "llm" / "generator.h").write_text('#include "core/tensor.h"\n')
        (root / "core" / "tensor.h").write_text("#pragma once\n")
        assert violations(root) == [], violations(root)
        (root / "core" / "tensor.h").write_text('#pragma once\n#include "llm/generator.h"\n')
        got = violations(root)
        assert got == ["core/tensor.h:2 includes llm/generator.h: core may not depend on llm"], got
    print("a planted back-edge (core -> llm) is caught")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        sys.exit(0)
    root = sys.argv[1] if len(sys.argv) > 1 else "src"
    bad = violations(root)
    for v in bad:
        print(v)
    print(f"{len(bad)} include(s) against the layers" if bad else f"{root}: every include follows the layers")
    sys.exit(1 if bad else 0)
