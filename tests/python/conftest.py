# pytest for the tern Python package (tests/python/run.sh builds the wheel, installs it into a venv and runs
# this suite against it). Shared data (ONNX node tests, ORT-GenAI models) comes from ../shared and its tests
# skip with a message when it is absent.
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("TERN_SHARED_DIR", REPO.parent / "shared"))
NODE_TESTS = SHARED / "onnx-node-tests" / "node"


def allowlisted_node_tests():
    """The ONNX node tests tern's conformance suite passes (tests/conformance_allowlist.txt)."""
    names = []
    for line in (REPO / "tests" / "conformance_allowlist.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


@pytest.fixture(scope="session")
def node_tests():
    if not NODE_TESTS.is_dir():
        pytest.skip(f"{NODE_TESTS} not found (shared data lives at ../shared)")
    return NODE_TESTS
