# The drop-in test: an onnxruntime script (ort_node_tests.py), unchanged, run with `tern` standing in for
# `onnxruntime` over the ONNX node tests of the ops LLM exports use — every case passes, as with
# onnxruntime itself.
import pathlib
import subprocess
import sys

from conftest import NODE_TESTS

SCRIPT = pathlib.Path(__file__).with_name("ort_node_tests.py")
# The ops of the decoder exports tern runs (shell globs of node-test names).
LLM_CASES = ["test_matmul_*", "test_gemm_*", "test_add*", "test_mul*", "test_div*", "test_sub*", "test_softmax_*",
             "test_gather_*", "test_reshape_*", "test_transpose_*", "test_concat_*", "test_slice*", "test_unsqueeze*",
             "test_squeeze*", "test_where_*", "test_expand_*", "test_range_*_delta", "test_cast_FLOAT_to_FLOAT16",
             "test_sqrt*", "test_pow*", "test_reduce_mean_*", "test_layer_normalization_*", "test_rms_normalization_*",
             "test_rotary_embedding*", "test_attention_4d*", "test_sigmoid*", "test_tanh*", "test_gelu_*", "test_erf*",
             "test_trilu*", "test_cumsum_*", "test_shape*", "test_split_[0-9evz]*", "test_equal", "test_equal_[biu]*", "test_neg*"]
TERN_AS_ORT = ("import runpy, sys, tern; sys.modules['onnxruntime'] = tern; sys.argv = sys.argv[1:]; "
               "runpy.run_path(sys.argv[0], run_name='__main__')")


def run(args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True)


def test_an_onnxruntime_script_runs_unchanged_on_tern(node_tests):
    theirs = run([str(SCRIPT), str(NODE_TESTS), *LLM_CASES])
    ours = run(["-c", TERN_AS_ORT, str(SCRIPT), str(NODE_TESTS), *LLM_CASES])
    print(theirs.stdout.splitlines()[-1], "|", ours.stdout.splitlines()[-1])
    assert ours.returncode == 0, ours.stdout + ours.stderr
    assert ours.stdout.splitlines()[-1].startswith("tern: ")
    cases = [line for line in ours.stdout.splitlines() if line.startswith("ok ")]
    assert len(cases) >= 400  # (the globs still match the node tests)
    # The same cases as onnxruntime passes (those it fails, tern passes too).
    theirs_ok = {line.split()[1] for line in theirs.stdout.splitlines() if line.startswith("ok ")}
    assert theirs_ok <= {line.split()[1] for line in cases}
