"""tern.InferenceSession: any ONNX model run on numpy arrays, called as onnxruntime.InferenceSession is."""
import ctypes
import dataclasses
import enum
import json
import os
import tempfile
import threading
import time
import warnings

import numpy as np

from . import _capi
from ._capi import Error, lib

# tern_dtype (ONNX's TensorProto numbers) ↔ numpy, and ONNX Runtime's type strings (NodeArg.type).
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
           9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}
try:  # numpy has no bfloat16 or 4-bit ints; ml_dtypes (installed with onnx, JAX, TensorFlow) has them
    import ml_dtypes
    _DTYPES.update({16: ml_dtypes.bfloat16, 21: ml_dtypes.uint4, 22: ml_dtypes.int4})
except ImportError:
    ml_dtypes = None
_CODES = {np.dtype(t): code for code, t in _DTYPES.items()}
_ORT_TYPES = {0: "tensor(undefined)", 1: "tensor(float)", 2: "tensor(uint8)", 3: "tensor(int8)", 4: "tensor(uint16)",
              5: "tensor(int16)", 6: "tensor(int32)", 7: "tensor(int64)", 9: "tensor(bool)", 10: "tensor(float16)",
              11: "tensor(double)", 12: "tensor(uint32)", 13: "tensor(uint64)", 16: "tensor(bfloat16)",
              21: "tensor(uint4)", 22: "tensor(int4)"}
_ORT_CODES = {name: code for code, name in _ORT_TYPES.items()}
_PACKED = (21, 22)  # 4-bit: tern holds two a byte (ml_dtypes one)


@dataclasses.dataclass(frozen=True)
class NodeArg:
    """A graph input or output as onnxruntime describes it: shape entries are ints, dim names, or None."""
    name: str
    type: str
    shape: list


@dataclasses.dataclass(frozen=True)
class ModelMetadata:
    """onnxruntime's ModelMetadata: the model file's producer, graph name, domain, descriptions, version and
    metadata_props (custom_metadata_map)."""
    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict


@dataclasses.dataclass(frozen=True)
class NodeProfile:
    """One node's run: times in microseconds from the first recorded node; flops and bytes from tern's cost
    model of the node (what `tern profile` draws its roofline from)."""
    node: str
    op_type: str
    kernel: str
    run: int
    start_us: float
    duration_us: float
    flops: float
    bytes: float


class GraphOptimizationLevel(enum.IntEnum):
    """Accepted for onnxruntime scripts; tern always runs its whole pass pipeline."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """Accepted for onnxruntime scripts; tern runs nodes in order, each kernel on all its threads."""
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """onnxruntime.SessionOptions' common fields, plus tern's own (isa, max_memory, device, weights).
    Fields tern has no use for are kept and ignored (listed in docs/python.md)."""
    __slots__ = ("intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level", "execution_mode",
                 "log_severity_level", "log_verbosity_level", "enable_mem_pattern", "enable_cpu_mem_arena",
                 "enable_mem_reuse", "optimized_model_filepath", "enable_profiling", "profile_file_prefix",
                 "isa", "max_memory", "device", "weights", "_config", "_dims", "_initializers")

    def __init__(self):
        self.intra_op_num_threads = 0  # 0: all cores
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.enable_mem_pattern = True
        self.enable_cpu_mem_arena = True
        self.enable_mem_reuse = True
        self.optimized_model_filepath = ""
        self.enable_profiling = False
        self.profile_file_prefix = "tern_profile"
        self.isa = None         # cap the CPU kernels' tier: "avx2", "avx512", …
        self.max_memory = 0     # bytes tern may own; 0 = the machine's memory
        self.device = "cpu"     # or "opencl", "opencl:N"
        self.weights = None     # convert weights at load: "fp16", "bf16", "int8", "int4"
        self._config = {}
        self._dims = {}
        self._initializers = {}

    def add_free_dimension_override_by_name(self, dim_name, dim_value):
        """The inputs' dim named dim_name is dim_value: fixed before shape inference, feeds must have it."""
        self._dims[dim_name] = int(dim_value)

    def add_initializer(self, name, ort_value):
        """The initializer `name` is this OrtValue (or numpy array) instead, read in place: same dtype and shape."""
        self._initializers[name] = ort_value.numpy() if isinstance(ort_value, OrtValue) else np.asarray(ort_value)

    def add_session_config_entry(self, key, value):
        self._config[key] = value

    def get_session_config_entry(self, key):
        return self._config[key]


class RunOptions:
    """Accepted for onnxruntime scripts (run tags, log levels); tern does not use them."""

    def __init__(self):
        self.log_severity_level = 2
        self.run_tag = ""
        self.terminate = False


_PROVIDER_DEVICES = {"CPUExecutionProvider": "cpu"}


def get_available_providers():
    return list(_PROVIDER_DEVICES)


def get_device():
    return "CPU"


def get_all_providers():
    """onnxruntime's: the providers this build knows (tern's: all of them are available)."""
    return get_available_providers()


def get_version_string():
    """onnxruntime's: the version (tern's)."""
    return lib.tern_version().decode()


def get_build_info():
    """onnxruntime's: the build line — tern's version, commit, compiler, ISA tier in use, OpenCL."""
    return lib.tern_build_info().decode()


_LOG_SEVERITY = [2]


def set_default_logger_severity(level):
    """onnxruntime's: 0 verbose … 4 fatal. tern's library logs nothing (errors are exceptions), so it is kept only."""
    if not isinstance(level, int) or not 0 <= level <= 4:
        raise ValueError(f"logger severity {level}: an integer 0 (verbose) to 4 (fatal)")
    _LOG_SEVERITY[0] = level


def _device_from_providers(providers, device):
    if device is not None or not providers:
        return device
    for p in providers:
        name = p[0] if isinstance(p, (tuple, list)) else p
        if name in _PROVIDER_DEVICES:
            return _PROVIDER_DEVICES[name]
        warnings.warn(f"tern: execution provider '{name}' is not one tern has; using the CPU "
                      "(tern's OpenCL device: device='opencl')", stacklevel=3)
    return "cpu"


def _node_arg(info):
    shape = None
    if info.rank >= 0:
        shape = [info.shape[d] if info.shape[d] >= 0 else _capi.text(info.dim_names[d]) or None
                 for d in range(info.rank)]
    return NodeArg(_capi.text(info.name), _ORT_TYPES.get(info.dtype, "tensor(undefined)"), shape)


def _as_input(name, value, declared=None):
    """A numpy array tern can read in place: C order, element-aligned, of a type tern carries (a copy only
    when the value is not already one). A Python list or number becomes the input's declared type, as
    onnxruntime converts it; a numpy array keeps its own (a wrong one is refused)."""
    dtype = _DTYPES.get(_ORT_CODES.get(declared)) if not isinstance(value, (np.ndarray, np.generic)) else None
    try:
        a = np.asarray(value, dtype=dtype) if dtype is not None else np.asarray(value)
    except (TypeError, ValueError) as e:
        raise _capi.InvalidArgumentError(f"input '{name}': {e}", _capi.INVALID_ARGUMENT) from None
    if a.dtype not in _CODES:
        raise _capi.InvalidArgumentError(f"input '{name}': numpy dtype {a.dtype} is not one tern takes "
                                         f"({', '.join(sorted(str(np.dtype(t)) for t in _DTYPES.values()))})",
                                         _capi.INVALID_ARGUMENT)
    if a.ndim > _capi.MAX_DIMS:
        raise _capi.InvalidArgumentError(f"input '{name}': rank {a.ndim} (tern takes up to {_capi.MAX_DIMS})",
                                         _capi.INVALID_ARGUMENT)
    return np.require(a, requirements=("C", "A"))


class InferenceSession:
    """Loads an ONNX model (a path, or the model's bytes) and runs it on numpy arrays.

    Called as onnxruntime.InferenceSession is: sess_options and providers are taken (CPUExecutionProvider is
    the CPU; others fall back to it with a warning); threads= and device= are tern's short forms.
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, *,
                 threads=None, device=None):
        o = sess_options or SessionOptions()
        self._options = o
        if o.optimized_model_filepath:
            warnings.warn(f"tern: optimized_model_filepath '{o.optimized_model_filepath}' is not written (tern's passes "
                          "make its own IR, not an ONNX file)", stacklevel=2)
        self._tempdir = None
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            # tern maps model files; bytes are written to a file of their own that lives with the session.
            self._tempdir = tempfile.TemporaryDirectory(prefix="tern-model-")
            path = os.path.join(self._tempdir.name, "model.onnx")
            with open(path, "wb") as f:
                f.write(path_or_bytes)
        else:
            path = os.fspath(path_or_bytes)
        dev = _device_from_providers(providers, device) or o.device or "cpu"
        inits = [(name, _CODES[a.dtype], a) for name, a in
                 ((n, _as_input(n, v)) for n, v in o._initializers.items())]
        self._handle = _capi.load("graph", path, threads=threads if threads is not None else o.intra_op_num_threads,
                                  isa=o.isa, max_memory=o.max_memory, device=dev, weights=o.weights,
                                  profiling=o.enable_profiling, dims=o._dims, initializers=inits)
        self._device = dev
        self._profile_start = time.time()
        self._inputs = [self._info(lib.tern_graph_input_info, i) for i in range(lib.tern_graph_input_count(self._handle))]
        self._outputs = [self._info(lib.tern_graph_output_info, i) for i in range(lib.tern_graph_output_count(self._handle))]

    def _info(self, fn, i):
        info = _capi.ValueInfo()
        _capi.check(fn(self._handle, i, ctypes.byref(info)), lib.tern_graph_error, self._handle)
        return _node_arg(info)

    def __del__(self):
        if getattr(self, "_handle", None):
            lib.tern_graph_free(self._handle)
            self._handle = None

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_modelmeta(self):
        """What the model file says of itself, as onnxruntime's ModelMetadata."""
        return ModelMetadata(**json.loads(lib.tern_graph_metadata(self._handle).decode("utf-8")))

    def get_overridable_initializers(self):
        return []

    def get_providers(self):
        return ["CPUExecutionProvider"] if self._device == "cpu" else [f"tern:{self._device}"]

    def get_session_options(self):
        return self._options

    def run(self, output_names, input_feed, run_options=None):
        """Runs the graph: input_feed maps input names to arrays (read in place when they are C-ordered and of
        the model's type); returns the outputs asked for (None: all, in the graph's order) as numpy arrays."""
        return self._run(output_names, input_feed)

    def _run(self, output_names, input_feed, into=None):
        """run(), with `into`: output name → a numpy array of the caller's that the output is written into (its
        buffer, as IOBinding.bind_output gives it) instead of a new one."""
        into = into or {}
        names = [a.name for a in self._outputs] if output_names is None else list(output_names)
        declared = {a.name: a.type for a in self._inputs}
        arrays = [(str(k), _as_input(str(k), v, declared.get(str(k)))) for k, v in input_feed.items()]
        inputs = (_capi.Tensor * max(len(arrays), 1))()
        keep = []  # the encoded names live until the call returns
        for t, (name, a) in zip(inputs, arrays):
            keep.append(name.encode())
            t.name, t.dtype, t.rank = keep[-1], _CODES[a.dtype], a.ndim
            for d, n in enumerate(a.shape):
                t.shape[d] = n
            data = _pack_nibbles(a) if t.dtype in _PACKED else a
            keep.append(data)
            t.data, t.bytes = (data.ctypes.data if data.nbytes else None), data.nbytes
        outputs = (_capi.Tensor * max(len(names), 1))()
        for t, name in zip(outputs, names):
            keep.append(str(name).encode())
            t.name, t.data = keep[-1], None  # NULL: the graph's memory, copied below
            if name in into:
                t.data, t.bytes = into[name].ctypes.data, into[name].nbytes
        status = lib.tern_graph_run(self._handle, inputs, len(arrays), outputs, len(names))
        _capi.check(status, lib.tern_graph_error, self._handle)
        return [into[name] if name in into else _to_numpy(outputs[i]) for i, name in enumerate(names)]

    # ---- onnxruntime's other ways in: OrtValues, IO binding, a run on a thread ----

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        """run() on OrtValues (each a numpy array tern reads in place), returning OrtValues."""
        feed = {k: v.numpy() for k, v in input_dict_ort_values.items()}
        return [OrtValue(a) for a in self._run(output_names, feed)]

    def io_binding(self):
        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None):
        """Runs on the binding's inputs; outputs go into the buffers bound for them, or new arrays
        (iobinding.get_outputs(), copy_outputs_to_cpu())."""
        names = [name for name, _ in iobinding._outputs]
        into = {name: buf for name, buf in iobinding._outputs if buf is not None}
        iobinding._results = [OrtValue(a) for a in self._run(names, iobinding._inputs, into)]

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None):
        """run() on a thread of its own; callback(outputs, user_data, error) is called from it with the numpy
        outputs and "" — or None and tern's message."""
        def work():
            try:
                outputs = self._run(output_names, input_feed)
            except Error as e:
                callback(None, user_data, str(e))
                return
            callback(outputs, user_data, "")

        threading.Thread(target=work, daemon=True).start()

    def set_providers(self, providers=None, provider_options=None):
        """Accepted as onnxruntime's (CPUExecutionProvider); other providers warn, as at load. The session keeps
        the device it was loaded for."""
        _device_from_providers(providers, None)

    def get_provider_options(self):
        return {p: {} for p in self.get_providers()}

    def disable_fallback(self):
        pass  # (tern has no other provider to fall back from)

    def enable_fallback(self):
        pass

    # ---- profiling (sess_options.enable_profiling) ----

    def get_profile(self):
        """Every node run since the session started (or the last end_profiling), as NodeProfile records."""
        nodes = ctypes.POINTER(_capi.NodeProfileC)()
        count = ctypes.c_size_t()
        _capi.check(lib.tern_graph_profile(self._handle, ctypes.byref(nodes), ctypes.byref(count)),
                    lib.tern_graph_error, self._handle)
        return [NodeProfile(_capi.text(n.node), _capi.text(n.op_type), _capi.text(n.kernel), n.run, n.start_us,
                            n.duration_us, n.flops, n.bytes) for n in nodes[:count.value]]

    def end_profiling(self):
        """Writes the profile as a Chrome trace (ONNX Runtime's profiler fields), starts a new one, and returns
        the file's name: `<profile_file_prefix>_<date>_<time>.json`, as onnxruntime does."""
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(self._profile_start))
        path = f"{self._options.profile_file_prefix}_{stamp}.json"
        _capi.check(lib.tern_graph_write_profile(self._handle, os.fsencode(path)), lib.tern_graph_error, self._handle)
        _capi.check(lib.tern_graph_profile_clear(self._handle), lib.tern_graph_error, self._handle)
        self._profile_start = time.time()
        return path


class OrtValue:
    """onnxruntime's OrtValue on the CPU: a numpy array (read and written in place)."""

    def __init__(self, array):
        self._array = array

    @staticmethod
    def ortvalue_from_numpy(numpy_obj, device_type="cpu", device_id=0):
        _cpu_only(device_type)
        return OrtValue(np.require(numpy_obj, requirements=("C", "A")))

    @staticmethod
    def ortvalue_from_shape_and_type(shape, element_type, device_type="cpu", device_id=0):
        _cpu_only(device_type)
        return OrtValue(np.empty(tuple(shape), dtype=element_type))

    def numpy(self):
        return self._array

    def shape(self):
        return list(self._array.shape)

    def data_type(self):
        return _ORT_TYPES.get(_CODES.get(self._array.dtype, 0), "tensor(undefined)")

    def element_type(self):
        return self._array.dtype.type

    def data_ptr(self):
        return self._array.ctypes.data

    def device_name(self):
        return "cpu"

    def is_tensor(self):
        return True

    def has_value(self):
        return True


def _cpu_only(device_type):
    if str(device_type).lower() != "cpu":
        raise _capi.InvalidArgumentError(f"device_type '{device_type}': tern's values live on the CPU",
                                         _capi.INVALID_ARGUMENT)


def _buffer_array(buffer_ptr, element_type, shape):
    """The caller's buffer at buffer_ptr as a numpy array of `shape` (no copy)."""
    dtype = np.dtype(element_type)
    count = int(np.prod(shape, dtype=np.int64))
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(buffer_ptr)
    return np.frombuffer(raw, dtype=dtype, count=count).reshape(tuple(shape))


class IOBinding:
    """onnxruntime's IOBinding on the CPU: inputs bound as arrays or buffers (read in place), outputs into
    buffers bound for them (written there) or new arrays; session.run_with_iobinding(binding) runs it."""

    def __init__(self, session):
        self._session = session
        self._inputs = {}
        self._outputs = []  # (name, array to write into or None)
        self._results = []

    def bind_cpu_input(self, name, arr_on_cpu):
        self._inputs[name] = arr_on_cpu

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        _cpu_only(device_type)
        self._inputs[name] = _buffer_array(buffer_ptr, element_type, shape)

    def bind_ortvalue_input(self, name, ortvalue):
        self._inputs[name] = ortvalue.numpy()

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None, buffer_ptr=None):
        _cpu_only(device_type)
        buf = _buffer_array(buffer_ptr, element_type, shape) if buffer_ptr is not None else None
        self._outputs = [(n, b) for n, b in self._outputs if n != name] + [(name, buf)]

    def bind_ortvalue_output(self, name, ortvalue):
        self._outputs = [(n, b) for n, b in self._outputs if n != name] + [(name, ortvalue.numpy())]

    def synchronize_inputs(self):
        pass  # (the CPU: nothing to wait for)

    def synchronize_outputs(self):
        pass

    def get_outputs(self):
        return list(self._results)

    def get_outputs_as_ortvaluevector(self):
        return list(self._results)

    def copy_outputs_to_cpu(self):
        return [v.numpy().copy() for v in self._results]

    def clear_binding_inputs(self):
        self._inputs = {}

    def clear_binding_outputs(self):
        self._outputs = []
        self._results = []


def _pack_nibbles(a):
    v = a.reshape(-1).view(np.uint8) & 0x0F
    if v.size % 2:
        v = np.append(v, np.uint8(0))
    return np.ascontiguousarray(v[0::2] | (v[1::2] << 4))


def _to_numpy(t):
    # Without ml_dtypes: bfloat16 as its bits (uint16), 4-bit ints one a byte (uint8 / int8).
    fallback = {16: np.uint16, 21: np.uint8, 22: np.int8}
    dtype = _DTYPES.get(t.dtype, fallback.get(t.dtype))
    if dtype is None:
        raise _capi.UnsupportedError(f"output '{_capi.text(t.name)}': element type {t.dtype}", _capi.UNSUPPORTED)
    shape = tuple(t.shape[d] for d in range(t.rank))
    if not t.bytes:
        return np.empty(shape, dtype=dtype)
    raw = np.frombuffer((ctypes.c_char * t.bytes).from_address(t.data), dtype=np.uint8)
    if t.dtype in _PACKED:
        n = int(np.prod(shape, dtype=np.int64))
        v = np.empty(2 * raw.size, np.uint8)
        v[0::2], v[1::2] = raw & 0x0F, raw >> 4
        v = v[:n]
        if t.dtype == 22:  # sign-extend
            v = ((v ^ 8).astype(np.int8) - 8)
        return v.view(np.int8 if t.dtype == 22 else np.uint8).astype(dtype).reshape(shape)
    return raw.view(dtype).reshape(shape).copy()  # the graph's memory is reused by the next run
