# tern.InferenceSession against onnxruntime: every ONNX backend node test whose ops tern implements gives
# ONNX Runtime's outputs (the test's own reference data where ONNX Runtime cannot run a case or disagrees with
# it), inputs and outputs are described as onnxruntime describes them, inputs are read in place, profiles come
# back as records, and tern's errors arrive as exceptions carrying tern's message.
import ctypes
import fnmatch
import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper, TensorProto

import tern
from conftest import NODE_TESTS, REPO

ALLOWLIST = {}
for _line in (REPO / "tests" / "conformance_allowlist.txt").read_text().splitlines():
    if _line.strip() and not _line.startswith("#"):
        _pattern, _, _reason = _line.partition(" ")
        ALLOWLIST[_pattern] = _reason.strip()

CASES = sorted(p.name for p in NODE_TESTS.iterdir() if (p / "model.onnx").is_file()) if NODE_TESTS.is_dir() else []
TOTALS = {"tern": 0, "reference data": 0}  # what each passing case was compared with


def tolerance(dtype):
    """The conformance runner's (src/runtime/test_data.cpp, compare_tensors)."""
    if dtype in (np.float32, np.float64):
        return 1e-3, 1e-4
    if dtype == np.float16:
        return 1e-2, 1e-2
    return 2e-2, 2e-2  # bfloat16


def close(actual, expected):
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False
    if actual.dtype.kind not in "fc" and actual.dtype.name != "bfloat16":
        return np.array_equal(actual, expected)
    rtol, atol = tolerance(actual.dtype)
    return np.allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def read_case(case_dir):
    model = onnx.load(str(case_dir / "model.onnx"))
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if any(not i.type.HasField("tensor_type") for i in list(inputs) + list(model.graph.output)):
        return None
    data = case_dir / "test_data_set_0"
    feeds = {}
    for k, i in enumerate(inputs):
        t = TensorProto()
        t.ParseFromString((data / f"input_{k}.pb").read_bytes())
        feeds[i.name] = numpy_helper.to_array(t)
    expected = []
    for k in range(len(model.graph.output)):
        t = TensorProto()
        t.ParseFromString((data / f"output_{k}.pb").read_bytes())
        expected.append(numpy_helper.to_array(t))
    return feeds, expected


@pytest.mark.parametrize("case", CASES or ["(no node tests)"])
def test_node_case_matches_onnxruntime(case, node_tests):
    reason = next((r for p, r in ALLOWLIST.items() if fnmatch.fnmatch(case, p)), None)
    if reason is not None:
        pytest.skip(f"allowlisted: {reason}")
    case_dir = node_tests / case
    read = read_case(case_dir)
    if read is None:
        pytest.skip("sequence- or optional-typed values (tern takes tensors)")
    feeds, expected = read
    try:
        sess = tern.InferenceSession(str(case_dir / "model.onnx"), threads=1)
    except tern.UnsupportedError as e:
        if "unsupported ops:" in str(e):
            pytest.skip(str(e).splitlines()[0])
        raise
    got = sess.run(None, feeds)
    reference, against = expected, "reference data"
    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        theirs = ort.InferenceSession(str(case_dir / "model.onnx"), so, providers=["CPUExecutionProvider"]).run(None, feeds)
        if all(close(t, e) for t, e in zip(theirs, expected)):
            reference, against = theirs, "tern"
    except Exception:  # an op or opset ONNX Runtime lacks: the test's own data decides
        pass
    assert len(got) == len(reference)
    for k, (g, r) in enumerate(zip(got, reference)):
        assert close(g, r), f"output {k}: tern {g.dtype}{list(g.shape)} vs {against} {r.dtype}{list(r.shape)}"
    TOTALS[against] += 1


def test_node_cases_ran(node_tests):
    """At least as many cases as the README counts for the conformance suite ran here (and most against
    ONNX Runtime itself)."""
    ran = sum(TOTALS.values())
    if ran == 0:
        pytest.skip("run with the node-case tests (pytest tests/python)")
    print(f"node tests: {TOTALS['tern']} equal to onnxruntime's outputs, {TOTALS['reference data']} to the reference data")
    assert ran >= 1100
    assert TOTALS["tern"] >= 1000


# ---- the graph's description, as onnxruntime gives it ----

LLAMA = REPO / "tests" / "fixtures" / "llama-gqa-torch" / "model.onnx"


def test_inputs_and_outputs_described_as_onnxruntime_does():
    ours = tern.InferenceSession(str(LLAMA), threads=2)
    theirs = ort.InferenceSession(str(LLAMA), providers=["CPUExecutionProvider"])
    assert [(x.name, x.type, x.shape) for x in ours.get_inputs()] == [(x.name, x.type, x.shape) for x in theirs.get_inputs()]
    # Outputs: tern gives the shapes its inference reached, which may name a dim the file left to a symbol of
    # its own (present.N.key's 'total_sequence_length' is 'past_sequence_length + sequence_length' here).
    a, b = ours.get_outputs(), theirs.get_outputs()
    assert [(x.name, x.type, len(x.shape)) for x in a] == [(x.name, x.type, len(x.shape)) for x in b]
    for x, y in zip(a, b):
        assert all(d == e for d, e in zip(x.shape, y.shape) if isinstance(e, int)), (x, y)


def test_a_decoder_graph_gives_onnxruntimes_logits():
    ours = tern.InferenceSession(str(LLAMA), threads=2)
    theirs = ort.InferenceSession(str(LLAMA), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in theirs.get_inputs():  # batch 2, 5 new tokens, 3 cached
        dims = {"batch_size": 2, "sequence_length": 5, "past_sequence_length": 3, "total_sequence_length": 8}
        shape = [d if isinstance(d, int) else dims[d] for d in i.shape]
        if i.name == "input_ids":
            feeds[i.name] = rng.integers(0, 300, shape).astype(np.int64)
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones(shape, np.int64)
        elif i.name == "position_ids":
            feeds[i.name] = np.tile(np.arange(3, 8, dtype=np.int64), (2, 1))
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    for a, b in zip(ours.run(None, feeds), theirs.run(None, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


# ---- many threads on one session ----

def test_one_session_from_8_threads_gives_the_serial_outputs():
    """As onnxruntime's run(): one InferenceSession shared by 8 threads x 50 runs, every output equal to the
    serial run's, no errors."""
    import threading

    sess = tern.InferenceSession(str(REPO / "models" / "default" / "model.onnx"), threads=2)
    rng = np.random.default_rng(0)
    cases = []
    for k in range(6):
        n, past = (1 if k % 2 else 2 + k), (4 + k if k % 3 else 0)
        feeds = {"input_ids": rng.integers(0, 1000, (1, n)).astype(np.int64),
                 "attention_mask": np.ones((1, past + n), np.int64),
                 "position_ids": np.arange(past, past + n, dtype=np.int64)[None]}
        for i in sess.get_inputs():
            if i.name.startswith("past_key_values"):
                feeds[i.name] = rng.standard_normal((1, i.shape[1], past, i.shape[3])).astype(np.float32)
        cases.append(feeds)
    serial = [sess.run(None, f) for f in cases]
    errors, differences = [], []

    def work(t):
        for i in range(50):
            k = (t + i) % len(cases)
            try:
                out = sess.run(None, cases[k])
            except Exception as e:  # noqa: BLE001 — every failure is counted
                errors.append(repr(e))
                continue
            if not all(np.array_equal(a, b) for a, b in zip(out, serial[k])):
                differences.append((t, i))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and differences == []


# ---- inputs in place, outputs in numpy's memory ----

def identity_model(tmp_path):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])])
    path = tmp_path / "identity.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    return path


def test_inputs_are_read_in_place(tmp_path):
    """An Identity graph's output, handed back by the C API without a copy, points into the caller's
    array: tern read the numpy buffer itself."""
    sess = tern.InferenceSession(str(identity_model(tmp_path)))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    lib = tern._lib
    t_in, t_out = tern._capi.Tensor(), tern._capi.Tensor()
    t_in.name, t_in.dtype, t_in.rank, t_in.data, t_in.bytes = b"x", 1, 2, x.ctypes.data, x.nbytes
    t_in.shape[0], t_in.shape[1] = 4, 3
    t_out.name = b"y"
    assert lib.tern_graph_run(sess._handle, ctypes.byref(t_in), 1, ctypes.byref(t_out), 1) == 0
    assert t_out.data == x.ctypes.data
    # Through run(): the result is numpy's own copy, and strided or foreign-typed inputs are made C-ordered.
    y = sess.run(["y"], {"x": x})[0]
    assert y.ctypes.data != x.ctypes.data and np.array_equal(y, x)
    wide = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(sess.run(None, {"x": wide[:, ::2]})[0], wide[:, ::2])
    np.testing.assert_array_equal(sess.run(None, {"x": np.asfortranarray(x)})[0], x)


def test_model_bytes_load_like_a_path(tmp_path):
    path = identity_model(tmp_path)
    sess = tern.InferenceSession(path.read_bytes())
    np.testing.assert_array_equal(sess.run(None, {"x": np.ones((2, 3), np.float32)})[0], np.ones((2, 3)))


# ---- profiling ----

def test_profile_records_every_node_and_writes_a_trace(tmp_path):
    so = tern.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "prof")
    sess = tern.InferenceSession(str(LLAMA), so, threads=2)
    feeds = {i.name: np.zeros([d if isinstance(d, int) else (1 if "past" not in d else 0) for d in i.shape],
                              np.int64 if i.type == "tensor(int64)" else np.float32) for i in sess.get_inputs()}
    feeds["input_ids"] = np.array([[1, 17, 93]], np.int64)
    feeds["attention_mask"] = np.ones((1, 3), np.int64)
    feeds["position_ids"] = np.arange(3, dtype=np.int64)[None]
    sess.run(None, feeds)
    sess.run(None, feeds)
    profile = sess.get_profile()
    assert profile and all(isinstance(p, tern.NodeProfile) for p in profile)
    assert {p.run for p in profile} == {0, 1}
    assert sum(p.run == 0 for p in profile) == sum(p.run == 1 for p in profile)
    kinds = {p.op_type for p in profile}
    assert "MatMul" in kinds or "Gemm" in kinds
    assert all(p.duration_us >= 0 for p in profile)
    assert any(p.kernel for p in profile if p.op_type == "MatMul")  # (the weight GEMMs name theirs)
    assert any(p.flops > 0 for p in profile)
    path = sess.end_profiling()
    assert path.startswith(str(tmp_path / "prof_")) and path.endswith(".json")
    events = json.load(open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert sum(e.get("cat") == "Node" for e in events) == len(profile)
    assert sess.get_profile() == []  # end_profiling starts a new one


def test_profile_without_profiling_is_an_error():
    sess = tern.InferenceSession(str(LLAMA))
    with pytest.raises(tern.InvalidArgumentError, match="loaded without profiling"):
        sess.get_profile()


# ---- errors: tern's message in a Python exception ----

BAD = REPO / "tests" / "bad_inputs"
EXPECTED = dict(line.split(": ", 1) for line in (BAD / "expected.txt").read_text().splitlines()
                if line and not line.startswith("#"))


@pytest.mark.parametrize("name,error", [
    ("empty.onnx", tern.ModelError), ("truncated.onnx", tern.ModelError), ("garbage.onnx", tern.ModelError),
    ("cycle.onnx", tern.ModelError), ("ext_absolute.onnx", tern.ModelError), ("ext_dotdot.onnx", tern.ModelError),
    ("unknown_op.onnx", tern.UnsupportedError),
])
def test_hostile_models_raise_terns_message(name, error):
    with pytest.raises(error) as e:
        tern.InferenceSession(str(BAD / "onnx_model" / name))
    assert EXPECTED[f"onnx_model/{name}"] in str(e.value)
    assert isinstance(e.value, tern.Error)


def test_missing_file_and_bad_arguments(tmp_path):
    with pytest.raises(tern.NoSuchFileError, match="nothing.onnx"):  # (a ModelError)
        tern.InferenceSession(str(tmp_path / "nothing.onnx"))
    with pytest.raises(tern.InvalidArgumentError, match="threads -3"):
        tern.InferenceSession(str(LLAMA), threads=-3)
    so = tern.SessionOptions()
    so.device = "quantum"
    with pytest.raises(tern.InvalidArgumentError, match="quantum"):
        tern.InferenceSession(str(LLAMA), so)
    with pytest.raises(AttributeError):
        so.no_such_option = 1


def test_bad_feeds_raise_terns_message(tmp_path):
    # (the caller's arguments: InvalidArgumentError, which is onnxruntime's InvalidArgument — test_ort_errors.py)
    sess = tern.InferenceSession(str(identity_model(tmp_path)))
    with pytest.raises(tern.InvalidArgumentError, match="'x'"):
        sess.run(None, {"x": np.ones((2, 3), np.int32)})  # the graph says float
    with pytest.raises(tern.InvalidArgumentError, match="x"):
        sess.run(None, {})
    with pytest.raises(tern.InvalidArgumentError, match="numpy dtype"):
        sess.run(None, {"x": np.array([["a", "b", "c"]])})
    with pytest.raises(tern.InvalidArgumentError, match="nope"):
        sess.run(["nope"], {"x": np.ones((2, 3), np.float32)})


def test_unknown_providers_fall_back_to_the_cpu_with_a_warning(tmp_path):
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        sess = tern.InferenceSession(str(identity_model(tmp_path)), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert tern.get_available_providers() == ["CPUExecutionProvider"]


def test_the_process_memory_limit_holds_over_every_session(tmp_path):
    """tern.set_process_memory_limit caps all of tern; a session's max_memory only itself."""
    path = tmp_path / "m.onnx"
    w = numpy_helper.from_array(np.ones((1024, 1024), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    tern.set_process_memory_limit(1 << 20)
    try:
        with pytest.raises(tern.MemoryLimitError, match="--max-memory 1.0 MB"):
            tern.InferenceSession(str(path))
    finally:
        tern.set_process_memory_limit(0)
    assert tern.InferenceSession(str(path)).run(None, {"x": np.ones((1, 1024), np.float32)})[0][0, 0] == 1024
