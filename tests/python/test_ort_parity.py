# onnxruntime's Python surface beyond run(), and its errors, through onnxruntime and through tern (`import tern as
# ort`): OrtValues, IO binding and run_async give onnxruntime's outputs; malformed calls raise, through tern, an
# exception of the class onnxruntime raises — its InvalidArgument, NoSuchFile, InvalidProtobuf
# (tern.capi.onnxruntime_pybind11_state, which tern's own exceptions derive from) or the Python built-in — so the
# ported script's `except` clauses still catch; and a list of numbers is converted as onnxruntime converts it.
import builtins

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxruntime
import tern


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("ort_errors")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x, w], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, d / "mm.onnx")
    (d / "empty.onnx").write_bytes(b"")
    return d


X, W = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)

CALLS = {
    "missing input": lambda rt, s, d: s.run(None, {"x": X}),
    "float64 for float": lambda rt, s, d: s.run(None, {"x": X.astype(np.float64), "w": W}),
    "int64 for float": lambda rt, s, d: s.run(None, {"x": X.astype(np.int64), "w": W}),
    "wrong rank": lambda rt, s, d: s.run(None, {"x": X.reshape(6), "w": W}),
    "wrong dimension": lambda rt, s, d: s.run(None, {"x": np.ones((2, 4), np.float32), "w": W}),
    "unknown input": lambda rt, s, d: s.run(None, {"x": X, "w": W, "z": X}),
    "unknown output": lambda rt, s, d: s.run(["nope"], {"x": X, "w": W}),
    "a string for a tensor": lambda rt, s, d: s.run(None, {"x": "hello", "w": W}),
    "feeds not a dict": lambda rt, s, d: s.run(None, [X, W]),
    "no such file": lambda rt, s, d: rt.InferenceSession(str(d / "nope.onnx"), providers=["CPUExecutionProvider"]),
    "bytes that are not protobuf": lambda rt, s, d: rt.InferenceSession(b"garbage bytes here",
                                                                       providers=["CPUExecutionProvider"]),
    "an empty file": lambda rt, s, d: rt.InferenceSession(str(d / "empty.onnx"), providers=["CPUExecutionProvider"]),
}


def raised(rt, call, d):
    s = rt.InferenceSession(str(d / "mm.onnx"), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception) as e:
        call(rt, s, d)
    return e.value


@pytest.mark.parametrize("name", list(CALLS))
def test_a_malformed_call_raises_onnxruntimes_class(name, files):
    theirs = type(raised(onnxruntime, CALLS[name], files))
    ours = raised(tern, CALLS[name], files)
    if theirs.__module__ == "builtins":
        expected = getattr(builtins, theirs.__name__)
    else:
        assert theirs.__module__ == "onnxruntime.capi.onnxruntime_pybind11_state"
        expected = getattr(tern.capi.onnxruntime_pybind11_state, theirs.__name__)
    assert isinstance(ours, expected), f"{name}: onnxruntime raises {theirs.__name__}, tern {type(ours).__mro__}"
    # ... and the same class reached the way a ported script spells it
    assert isinstance(ours, getattr(tern.capi.onnxruntime_pybind11_state, theirs.__name__, expected))


def test_lists_of_numbers_are_converted_as_onnxruntime_converts_them(files):
    feed = {"x": [[1.0, 2, 3], [4, 5, 6]], "w": [[1, 0], [0, 1], [1, 1]]}
    ours = tern.InferenceSession(str(files / "mm.onnx")).run(None, feed)[0]
    theirs = onnxruntime.InferenceSession(str(files / "mm.onnx"), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert ours.dtype == theirs.dtype == np.float32
    np.testing.assert_array_equal(ours, theirs)


def io_binding_example(rt, d):
    """onnxruntime's IO-binding example: an OrtValue input, a CPU array input, one output into a buffer of one's
    own and one left to the runtime; then run_with_ort_values and run_async on the same inputs."""
    sess = rt.InferenceSession(str(d / "mm.onnx"), providers=["CPUExecutionProvider"])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.arange(6, dtype=np.float32).reshape(3, 2) / 7
    binding = sess.io_binding()
    binding.bind_ortvalue_input("x", rt.OrtValue.ortvalue_from_numpy(x))
    binding.bind_cpu_input("w", w)
    mine = np.zeros((2, 2), np.float32)
    binding.bind_output("y", "cpu", 0, np.float32, list(mine.shape), mine.ctypes.data)
    sess.run_with_iobinding(binding)
    into_mine = mine.copy()
    binding.clear_binding_outputs()
    binding.bind_output("y")
    sess.run_with_iobinding(binding)
    theirs = binding.copy_outputs_to_cpu()[0]
    value = binding.get_outputs()[0]
    ort_values = sess.run_with_ort_values(None, {"x": rt.OrtValue.ortvalue_from_numpy(x),
                                                "w": rt.OrtValue.ortvalue_from_numpy(w)})
    done, got = __import__("threading").Event(), {}

    def callback(outputs, user_data, error):
        got.update(outputs=outputs, user_data=user_data, error=error)
        done.set()

    sess.run_async(None, {"x": x, "w": w}, callback, "tag")
    assert done.wait(30)
    return {"into_mine": into_mine, "copied": theirs, "value": value.numpy(), "value_shape": value.shape(),
            "value_type": value.data_type(), "ort_values": ort_values[0].numpy(), "async": got["outputs"][0],
            "async_tag": got["user_data"], "async_error": got["error"] or "",
            "providers": sess.get_provider_options()}


def test_io_binding_ort_values_and_run_async_give_onnxruntimes_outputs(files):
    ours, theirs = io_binding_example(tern, files), io_binding_example(onnxruntime, files)
    assert ours.keys() == theirs.keys()
    for key in ours:
        if isinstance(theirs[key], np.ndarray):
            np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-6, err_msg=key)
        else:
            assert ours[key] == theirs[key], key


def test_get_inputs_and_outputs_give_every_dim_the_file_fixes(node_tests):
    # Over the ONNX node tests both load: where onnxruntime reports a fixed dim, tern does too — its own inference
    # where it knows the dim, else the file's declared output shape (an output whose size the input values decide:
    # Slice, Range, Tile, Expand, NonZero, the window functions).
    missing, compared = [], 0
    for path in sorted(node_tests.glob("*/model.onnx")):
        name = path.parent.name
        try:
            theirs = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            ours = tern.InferenceSession(str(path))
        except Exception:  # (a case one of them cannot load)
            continue
        compared += 1
        for kind in ("get_inputs", "get_outputs"):
            for a, b in zip(getattr(theirs, kind)(), getattr(ours, kind)()):
                if a.shape is not None and (b.shape is None or any(isinstance(x, int) and y != x for x, y in zip(a.shape, b.shape))):
                    missing.append((name, a.name, a.shape, b.shape))
    assert compared > 1000 and missing == []


def test_optimized_model_filepath_is_warned_about_not_silently_ignored(files, tmp_path):
    options = tern.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    with pytest.warns(UserWarning, match="optimized_model_filepath"):
        tern.InferenceSession(str(files / "mm.onnx"), options)
    assert not (tmp_path / "optimized.onnx").exists()


def test_get_modelmeta_gives_onnxruntimes_fields(files, tmp_path):
    model = onnx.load(files / "mm.onnx")
    model.producer_name, model.domain, model.model_version, model.doc_string = "tern-tests", "ai.tern", 7, "a MatMul"
    model.graph.doc_string = "one node"
    onnx.helper.set_model_props(model, {"author": "tern", "license": "MIT"})
    onnx.save(model, tmp_path / "meta.onnx")
    ours = tern.InferenceSession(str(tmp_path / "meta.onnx")).get_modelmeta()
    theirs = onnxruntime.InferenceSession(str(tmp_path / "meta.onnx"), providers=["CPUExecutionProvider"]).get_modelmeta()
    for field in ("producer_name", "graph_name", "domain", "description", "graph_description", "version",
                  "custom_metadata_map"):
        assert getattr(ours, field) == getattr(theirs, field), field


def test_a_fixed_dim_and_an_initializer_of_ones_own_as_onnxruntime_takes_them(tmp_path):
    # y = x · W with x [batch, 3] (batch named) and W an initializer: add_free_dimension_override_by_name fixes batch
    # (get_inputs reports it, a feed of another size is refused as onnxruntime refuses it); add_initializer replaces W.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])
    w = helper.make_tensor("W", TensorProto.FLOAT, [3, 2], [1, 0, 0, 1, 1, 1])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "w.onnx")
    mine = np.arange(6, dtype=np.float32).reshape(3, 2)
    feed = np.arange(6, dtype=np.float32).reshape(2, 3)

    kept = []  # (onnxruntime reads an added initializer in place and holds no reference: the caller keeps it)

    def session(rt):
        options = rt.SessionOptions()
        options.add_free_dimension_override_by_name("batch", 2)
        kept.append(rt.OrtValue.ortvalue_from_numpy(mine))
        options.add_initializer("W", kept[-1])
        return rt.InferenceSession(str(tmp_path / "w.onnx"), options, providers=["CPUExecutionProvider"])

    ours, theirs = session(tern), session(onnxruntime)
    assert ours.get_inputs()[0].shape == theirs.get_inputs()[0].shape == [2, 3]
    np.testing.assert_array_equal(ours.run(None, {"x": feed})[0], theirs.run(None, {"x": feed})[0])
    np.testing.assert_array_equal(ours.run(None, {"x": feed})[0], feed @ mine)
    for rt, s in ((tern, ours), (onnxruntime, theirs)):
        with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument if rt is onnxruntime
                           else tern.capi.onnxruntime_pybind11_state.InvalidArgument):
            s.run(None, {"x": np.ones((3, 3), np.float32)})
    wrong = tern.SessionOptions()
    wrong.add_initializer("W", np.ones((2, 2), np.float32))
    with pytest.raises(tern.ModelError, match="add_initializer: 'W' is float32"):
        tern.InferenceSession(str(tmp_path / "w.onnx"), wrong)
