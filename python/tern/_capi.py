"""The C API (include/tern/tern.h) through ctypes: the library, its structs and prototypes, and statuses
turned into exceptions. Everything else in the package is Python over these calls.

Why ctypes and not a compiled extension: the C API is already tern's stable boundary (opaque handles, no
C++ exception crosses it, statuses with messages), so the package needs no code of its own compiled per
Python version — the wheel is libtern.so plus these files (py3-none), as llama-cpp-python does over
llama.h. ctypes releases the GIL around every call, so runs on other threads proceed.
"""
import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_double, c_float, c_int, c_int32, c_int64,
                    c_size_t, c_uint64, c_void_p)

from .capi import onnxruntime_pybind11_state as _ort

MAX_DIMS = 8

# tern_status
OK, INVALID_ARGUMENT, MODEL, UNSUPPORTED, MEMORY_LIMIT, BUFFER_TOO_SMALL, INTERNAL = range(7)


class Error(RuntimeError):
    """A failure inside tern: the message is tern's (it names the node, tensor, file or field)."""

    def __init__(self, message, status=INTERNAL):
        super().__init__(message)
        self.status = status


# Each kind is also the class onnxruntime raises for the same failure (tern.capi.onnxruntime_pybind11_state).
class InvalidArgumentError(Error, ValueError, _ort.InvalidArgument):
    """An argument out of range, an unknown name, a NULL where a value was needed; a run's input missing or of a
    name, type or shape the graph lacks."""


class ModelError(Error, _ort.Fail):
    """A file missing, unreadable, corrupt or hostile."""


class NoSuchFileError(ModelError, _ort.NoSuchFile):
    """A model file that is not there."""


class InvalidProtobufError(ModelError, _ort.InvalidProtobuf):
    """A model file that is not an ONNX protobuf (truncated, or another kind of file)."""


class NoGraphError(ModelError, _ort.InvalidArgument):
    """A model file with no graph in it (an empty file): onnxruntime's InvalidArgument."""


class UnsupportedError(Error, NotImplementedError, _ort.NotImplemented):
    """An op, data type or feature tern does not implement (or this build lacks)."""


class MemoryLimitError(Error, MemoryError, _ort.RuntimeException):
    """The memory cap (max_memory) or the machine's memory."""


class InternalError(Error, _ort.RuntimeException):
    """A bug in tern; the message says what."""


_ERRORS = {INVALID_ARGUMENT: InvalidArgumentError, MODEL: ModelError, UNSUPPORTED: UnsupportedError,
           MEMORY_LIMIT: MemoryLimitError, BUFFER_TOO_SMALL: InternalError, INTERNAL: InternalError}


class Tensor(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("rank", c_int32), ("shape", c_int64 * MAX_DIMS),
                ("data", c_void_p), ("bytes", c_size_t)]


class ValueInfo(Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("rank", c_int32), ("shape", c_int64 * MAX_DIMS),
                ("dim_names", c_char_p * MAX_DIMS)]


class NodeProfileC(Structure):
    _fields_ = [("node", c_char_p), ("op_type", c_char_p), ("kernel", c_char_p), ("run", c_int64),
                ("start_us", c_double), ("duration_us", c_double), ("flops", c_double), ("bytes", c_double)]


class ModelInfo(Structure):
    _fields_ = [("vocab_size", c_int64), ("context_length", c_int64), ("window", c_int64),
                ("bos_token_id", c_int64), ("eos_token_id", c_int64)]


class Sampling(Structure):
    _fields_ = [("temperature", c_float), ("top_k", c_int32), ("top_p", c_float), ("min_p", c_float),
                ("repetition_penalty", c_float), ("seed", c_uint64)]


class BeamOptions(Structure):
    _fields_ = [("num_beams", c_int32), ("num_return_sequences", c_int32), ("length_penalty", c_float),
                ("early_stopping", c_int), ("max_new_tokens", c_int64), ("min_new_tokens", c_int64)]


class GenerateParams(Structure):
    _fields_ = [("max_new_tokens", c_int64), ("sampling", POINTER(Sampling)), ("stop", POINTER(c_char_p)),
                ("stop_count", c_size_t), ("chat", c_int)]


TEXT_CALLBACK = CFUNCTYPE(c_int, c_void_p, c_size_t, c_void_p)

_P = c_void_p  # every handle is opaque
_PROTOTYPES = {
    "tern_status_name": (c_char_p, [c_int]),
    "tern_version": (c_char_p, []),
    "tern_build_info": (c_char_p, []),
    "tern_options_create": (_P, []),
    "tern_options_free": (None, [_P]),
    "tern_options_error": (c_char_p, [_P]),
    "tern_options_set_threads": (c_int, [_P, c_int]),
    "tern_options_set_isa": (c_int, [_P, c_char_p]),
    "tern_options_set_max_memory": (c_int, [_P, c_uint64]),
    "tern_options_set_window": (c_int, [_P, c_int64]),
    "tern_options_set_kv_dtype": (c_int, [_P, c_char_p]),
    "tern_options_set_device": (c_int, [_P, c_char_p]),
    "tern_options_set_weights": (c_int, [_P, c_char_p]),
    "tern_options_set_dtype": (c_int, [_P, c_char_p]),
    "tern_options_set_profiling": (c_int, [_P, c_int]),
    "tern_graph_load": (c_int, [c_char_p, _P, POINTER(_P)]),
    "tern_graph_free": (None, [_P]),
    "tern_graph_error": (c_char_p, [_P]),
    "tern_graph_metadata": (c_char_p, [_P]),
    "tern_options_set_dim": (c_int, [_P, c_char_p, c_int64]),
    "tern_options_add_initializer": (c_int, [_P, POINTER(Tensor)]),
    "tern_graph_input_count": (c_size_t, [_P]),
    "tern_graph_output_count": (c_size_t, [_P]),
    "tern_graph_input_info": (c_int, [_P, c_size_t, POINTER(ValueInfo)]),
    "tern_graph_output_info": (c_int, [_P, c_size_t, POINTER(ValueInfo)]),
    "tern_graph_run": (c_int, [_P, POINTER(Tensor), c_size_t, POINTER(Tensor), c_size_t]),
    "tern_graph_profile": (c_int, [_P, POINTER(POINTER(NodeProfileC)), POINTER(c_size_t)]),
    "tern_graph_profile_clear": (c_int, [_P]),
    "tern_graph_write_profile": (c_int, [_P, c_char_p]),
    "tern_model_load": (c_int, [c_char_p, _P, POINTER(_P)]),
    "tern_model_free": (None, [_P]),
    "tern_model_clone": (c_int, [_P, POINTER(_P)]),
    "tern_set_process_memory_limit": (c_int, [c_uint64]),
    "tern_model_error": (c_char_p, [_P]),
    "tern_model_get_info": (c_int, [_P, POINTER(ModelInfo)]),
    "tern_tokenize": (c_int, [_P, c_char_p, c_int, POINTER(c_int32), c_size_t, POINTER(c_size_t)]),
    "tern_chat_tokenize": (c_int, [_P, POINTER(c_char_p), POINTER(c_char_p), c_size_t, POINTER(c_int32), c_size_t,
                                   POINTER(c_size_t)]),
    "tern_detokenize": (c_int, [_P, POINTER(c_int32), c_size_t, c_char_p, c_size_t, POINTER(c_size_t)]),
    "tern_text_stream_create": (c_int, [_P, POINTER(c_int32), c_size_t, POINTER(_P)]),
    "tern_text_stream_free": (None, [_P]),
    "tern_text_stream_push": (c_int, [_P, c_int32, POINTER(c_void_p), POINTER(c_size_t)]),
    "tern_text_stream_flush": (c_int, [_P, POINTER(c_void_p), POINTER(c_size_t)]),
    "tern_sampling_default": (None, [POINTER(Sampling)]),
    "tern_model_reset": (c_int, [_P]),
    "tern_model_prefill": (c_int, [_P, POINTER(c_int32), c_size_t]),
    "tern_model_set_sampling": (c_int, [_P, POINTER(Sampling)]),
    "tern_model_sampling_default": (c_int, [_P, POINTER(Sampling)]),
    "tern_model_sample": (c_int, [_P, POINTER(c_int32)]),
    "tern_model_rewind": (c_int, [_P, c_size_t]),
    "tern_model_set_logits": (c_int, [_P, POINTER(c_float), c_int64]),
    "tern_model_type": (c_char_p, [_P]),
    "tern_model_pad_token_id": (c_int64, [_P]),
    "tern_model_end_tokens": (c_int, [_P, POINTER(c_int32), c_size_t, POINTER(c_size_t)]),
    "tern_token_id": (c_int, [_P, c_char_p, POINTER(c_int32)]),
    "tern_chat_format": (c_int, [_P, POINTER(c_char_p), POINTER(c_char_p), c_size_t, c_char_p, c_size_t, POINTER(c_size_t)]),
    "tern_model_step": (c_int, [_P, POINTER(c_int32)]),
    "tern_chat_render": (c_int, [_P, c_char_p, c_char_p, c_char_p, c_int, c_char_p, c_size_t, POINTER(c_size_t)]),
    "tern_model_set_json_schema": (c_int, [_P, c_char_p, c_int64]),
    "tern_model_constraint_done": (c_int, [_P]),
    "tern_beam_options_default": (None, [POINTER(BeamOptions)]),
    "tern_beam_search_start": (c_int, [_P, POINTER(POINTER(c_int32)), POINTER(c_size_t), c_size_t, POINTER(BeamOptions)]),
    "tern_beam_search_step": (c_int, [_P, POINTER(c_int)]),
    "tern_beam_search_tokens": (c_int, [_P, POINTER(POINTER(c_int32)), POINTER(c_size_t)]),
    "tern_beam_search_sequence": (c_int, [_P, c_size_t, POINTER(POINTER(c_int32)), POINTER(c_size_t)]),
    "tern_model_logits": (c_int, [_P, POINTER(POINTER(c_float)), POINTER(c_int64)]),
    "tern_model_position": (c_int64, [_P]),
    "tern_model_is_end_token": (c_int, [_P, c_int32]),
    "tern_generate_params_default": (None, [POINTER(GenerateParams)]),
    "tern_generate": (c_int, [_P, c_char_p, POINTER(GenerateParams), TEXT_CALLBACK, c_void_p, POINTER(c_int64)]),
    "tern_model_set_speculation": (c_int, [_P, c_char_p, _P]),
    "tern_chat_completion": (c_int, [_P, c_char_p, TEXT_CALLBACK, c_void_p, POINTER(c_void_p), POINTER(c_size_t)]),
}


def _load():
    # TERN_LIBRARY: a libtern.so of one's own build (build/libtern.so) instead of the wheel's.
    path = os.environ.get("TERN_LIBRARY") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "libtern.so")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"tern: cannot load the tern library '{path}': {e} (pip install the tern package, or set "
                          "TERN_LIBRARY to a built libtern.so)") from e
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


lib = _load()


def text(b):
    return b.decode("utf-8", errors="replace") if b is not None else ""


def check(status, message_of, handle):
    """Raises the exception for a failed status with the handle's message."""
    if status != OK:
        raise _ERRORS.get(status, InternalError)(text(message_of(handle)), status)


def check_options(status, options):
    check(status, lib.tern_options_error, options)


def make_options(threads=0, isa=None, max_memory=0, window=0, kv_dtype=None, device=None, weights=None, dtype=None,
                 profiling=False, dims=None, initializers=()):
    """A tern_options handle with these settings (the caller frees it with lib.tern_options_free). dims: {name: value}
    fixed; initializers: (name, tern_dtype, C-ordered numpy array) replacing the graph's (the arrays outlive it)."""
    o = lib.tern_options_create()
    if not o:
        raise MemoryError("tern: out of memory for options")
    try:
        check_options(lib.tern_options_set_threads(o, int(threads or 0)), o)
        if isa:
            check_options(lib.tern_options_set_isa(o, isa.encode()), o)
        if max_memory:
            check_options(lib.tern_options_set_max_memory(o, int(max_memory)), o)
        if window:
            check_options(lib.tern_options_set_window(o, int(window)), o)
        if kv_dtype:
            check_options(lib.tern_options_set_kv_dtype(o, kv_dtype.encode()), o)
        if device:
            check_options(lib.tern_options_set_device(o, device.encode()), o)
        if weights:
            check_options(lib.tern_options_set_weights(o, weights.encode()), o)
        if dtype:
            check_options(lib.tern_options_set_dtype(o, dtype.encode()), o)
        check_options(lib.tern_options_set_profiling(o, 1 if profiling else 0), o)
        for name, value in (dims or {}).items():
            check_options(lib.tern_options_set_dim(o, name.encode(), int(value)), o)
        for name, code, a in initializers:
            t = Tensor()
            t.name, t.dtype, t.rank = name.encode(), code, a.ndim
            for d, n in enumerate(a.shape):
                t.shape[d] = n
            t.data, t.bytes = (a.ctypes.data if a.nbytes else None), a.nbytes
            check_options(lib.tern_options_add_initializer(o, ctypes.byref(t)), o)
    except BaseException:
        lib.tern_options_free(o)
        raise
    return o


def _load_error_kind(message, path):
    """The kind of a failed load, as onnxruntime tells them apart: the file is not there, is not protobuf (the
    loader's "(truncated or corrupt protobuf)", src/graph/onnx_loader.cpp), holds no graph, or else a ModelError."""
    if not os.path.exists(path):
        return NoSuchFileError
    if "(truncated or corrupt protobuf)" in message:
        return InvalidProtobufError
    if "has no graph" in message:
        return NoGraphError
    return ModelError


def load(kind, path, **options):
    """A loaded tern_graph or tern_model handle (kind "graph" or "model") for `path`, with make_options'
    settings; a failed load raises with tern's message (its handle freed)."""
    load_fn, error_fn, free_fn = (getattr(lib, f"tern_{kind}_{name}") for name in ("load", "error", "free"))
    opts = make_options(**options)
    try:
        handle = ctypes.c_void_p()
        status = load_fn(os.fsencode(path), opts, ctypes.byref(handle))
        if status != OK:
            try:
                check(status, error_fn, handle)
            except ModelError as e:
                raise _load_error_kind(str(e), path)(str(e), status) from None
            finally:
                free_fn(handle)
        return handle
    finally:
        lib.tern_options_free(opts)
