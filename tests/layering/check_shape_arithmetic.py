#!/usr/bin/env python3
"""Shape arithmetic goes through core/checked_math.h: no raw `+`, `-` or `*` on a Dim's value in the shape rules
(src/ops, src/passes, src/graph). Sizes come from files; a wrapped int64 is undefined behaviour that a release
build carries on with. Lines listed in ALLOWED are exceptions, each with the reason it cannot overflow.
Usage: check_shape_arithmetic.py SRC_DIR"""
import pathlib
import re
import sys

PATTERNS = [
    re.compile(r"\.value\s*[-+*]\s*[\w(]"),                # d.value + x
    re.compile(r"[\w)\]]\s*[-+*]\s*[\w\[\]]+\.value\b(?!\s*\()"),    # x * d.value (not a call: m.value(c))
    re.compile(r"[-+*]=\s*[^;]*\.value\b(?!\s*\()"),                 # p *= d.value
    re.compile(r"\.value\s*[-+*]="),                        # d.value += x
]
ALLOWED = {
    # d.value minus a checked product no larger than d.value + chunk: the result lies in [-chunk, d.value].
    ("ops/concat_split.cpp", "d.value - checked_mul(i, chunk, \"Split\")"),
}


def main():
    src = pathlib.Path(sys.argv[1])
    found = []
    for folder in ("ops", "passes", "graph"):
        for path in sorted((src / folder).rglob("*.cpp")) + sorted((src / folder).rglob("*.h")):
            rel = path.relative_to(src).as_posix()
            for n, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("//")[0]
                if any(p.search(code) for p in PATTERNS) and not any(rel == f and frag in code for f, frag in ALLOWED):
                    found.append(f"{rel}:{n}: {line.strip()}")
    for f in found:
        print(f"raw arithmetic on a dim (use core/checked_math.h): {f}")
    print(f"shape arithmetic: {len(found)} raw uses, {len(ALLOWED)} allowed exception(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
