"""Runs ONNX backend node tests with ONNX Runtime's Python API and checks each output against the test's
reference data. A plain onnxruntime script: tests/python/test_drop_in.py runs it unchanged, once with
onnxruntime and once with `tern` standing in for it (sys.modules["onnxruntime"] = tern).

    python ort_node_tests.py NODE_TEST_DIR PATTERN...     (shell globs of case names)

Prints one line per case and a count; exits 1 when a case fails (a load error is a failure too).
"""
import fnmatch
import glob
import os
import sys

import numpy as np
import onnxruntime as ort
from onnx import numpy_helper, TensorProto


def load_tensor(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def run_case(case_dir):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(os.path.join(case_dir, "model.onnx"), sess_options=so,
                                providers=["CPUExecutionProvider"])
    data = os.path.join(case_dir, "test_data_set_0")
    n_in = len(glob.glob(os.path.join(data, "input_*.pb")))
    feeds = {sess.get_inputs()[i].name: load_tensor(os.path.join(data, f"input_{i}.pb")) for i in range(n_in)}
    names = [o.name for o in sess.get_outputs()]
    outputs = sess.run(names, feeds)
    for i, got in enumerate(outputs):
        want = load_tensor(os.path.join(data, f"output_{i}.pb"))
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4, err_msg=names[i])
        else:
            np.testing.assert_array_equal(got, want, err_msg=names[i])


def main():
    root, patterns = sys.argv[1], sys.argv[2:]
    cases = sorted(c for c in os.listdir(root) if any(fnmatch.fnmatch(c, p) for p in patterns))
    failed = 0
    for case in cases:
        try:
            run_case(os.path.join(root, case))
            print(f"ok   {case}")
        except Exception as e:
            failed += 1
            print(f"FAIL {case}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    print(f"{ort.__name__}: {len(cases) - failed} of {len(cases)} passed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
