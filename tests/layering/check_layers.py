#!/usr/bin/env python3
"""The layers of src/ depend one way: each may include only itself and the layers before it,

    core -> graph -> kernels -> ops -> passes -> runtime -> llm -> convert -> diagnostics -> api
    (tools/ and tests/ may include any; convert and diagnostics are what a minimal build leaves out)

Prints every #include "..." under ROOT (default src/) that points the other way, and every file outside
a layer, and exits 1 if there is one. src/ includes nothing from tools/. With --tool DIR (tools/serve): that
tool sits above src's layers up to llm (a server runs models, it does not convert or diagnose them: the
minimal build leaves those out) and includes no other tool. --self-test plants a back-edge in a scratch tree and checks it is
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
            if target == "tools":
                found.append(f"{rel}:{n} includes {m.group(1)}: {layer} may not depend on tools")
    return found


def tool_violations(tool_dir, top="llm"):
    """The includes of a tool's folder (tools/NAME) that reach past src's `top` layer or into another tool."""
    tool_dir = pathlib.Path(tool_dir)
    name = f"tools/{tool_dir.name}/"
    found = []
    for path in sorted(p for p in tool_dir.rglob("*") if p.is_file()):
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc, target = m.group(1), m.group(1).split("/")[0]
            if target in LAYERS and LAYERS.index(target) > LAYERS.index(top):
                found.append(f"{name}{path.relative_to(tool_dir)}:{n} includes {inc}: {name[:-1]} may use src up to {top}")
            elif target == "tools" and not inc.startswith(name):
                found.append(f"{name}{path.relative_to(tool_dir)}:{n} includes {inc}: {name[:-1]} may not depend on another tool")
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
        (root / "core" / "tensor.h").write_text('#pragma once\n#include "tools/serve/server.h"\n')
        got = violations(root)
        assert got == ["core/tensor.h:2 includes tools/serve/server.h: core may not depend on tools"], got
        serve = root / "tools" / "serve"
        serve.mkdir(parents=True)
        (serve / "server.cpp").write_text('#include "tools/serve/server.h"\n#include "llm/generator.h"\n')
        assert tool_violations(serve) == [], tool_violations(serve)
        (serve / "server.cpp").write_text('#include "convert/gguf_import.h"\n#include "tools/cli/cli.h"\n')
        got = tool_violations(serve)
        assert got == ["tools/serve/server.cpp:1 includes convert/gguf_import.h: tools/serve may use src up to llm",
                       "tools/serve/server.cpp:2 includes tools/cli/cli.h: tools/serve may not depend on another tool"], got
    print("a planted back-edge (core -> llm, core -> tools, tools/serve -> convert and -> tools/cli) is caught")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        sys.exit(0)
    args = sys.argv[1:]
    tools = [args[i + 1] for i in range(len(args) - 1) if args[i] == "--tool"]
    rest = [a for i, a in enumerate(args) if a != "--tool" and (i == 0 or args[i - 1] != "--tool")]
    root = rest[0] if rest else "src"
    bad = violations(root)
    for tool in tools:
        bad += tool_violations(tool)
        root += f" and {tool}"
    for v in bad:
        print(v)
    print(f"{len(bad)} include(s) against the layers" if bad else f"{root}: every include follows the layers")
    sys.exit(1 if bad else 0)
