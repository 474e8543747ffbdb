"""tern: run ONNX transformer language models without ONNX Runtime.

    import tern
    sess = tern.InferenceSession("model.onnx")          # as onnxruntime.InferenceSession
    outputs = sess.run(None, {"input": array})

    model = tern.Model("models/default")                # as onnxruntime_genai.Model
    print(tern.generate(model, "And God said", max_new_tokens=40))

docs/python.md has the API and notes for porting from onnxruntime and onnxruntime-genai.
"""
from . import capi
from ._capi import (Error, InternalError, InvalidArgumentError, InvalidProtobufError, MemoryLimitError, ModelError,
                    NoGraphError, NoSuchFileError, UnsupportedError, lib as _lib)
from .genai import (Audios, Config, Generator, GeneratorParams, Images, Llama, Model, Tensor, Tokenizer, TokenizerStream,
                    generate, register_execution_provider_library, set_log_options)
from .session import (ExecutionMode, GraphOptimizationLevel, InferenceSession, IOBinding, NodeArg, NodeProfile,
                      OrtValue, RunOptions, SessionOptions, get_all_providers, get_available_providers, get_build_info,
                      get_device, get_version_string, set_default_logger_severity)

__version__ = _lib.tern_version().decode()


def set_process_memory_limit(nbytes):
    """Caps the memory all of tern may own in this process, over every session and model (0: the machine's
    physical memory). Each session's own cap is its options' max_memory."""
    if int(nbytes) < 0:
        raise InvalidArgumentError(f"memory limit {nbytes} is negative", 1)
    _lib.tern_set_process_memory_limit(int(nbytes))


build_info = _lib.tern_build_info().decode()

__all__ = ["InferenceSession", "SessionOptions", "RunOptions", "OrtValue", "IOBinding", "NodeArg", "NodeProfile", "GraphOptimizationLevel",
           "ExecutionMode", "get_available_providers", "get_all_providers", "get_version_string", "get_build_info",
           "set_default_logger_severity", "get_device", "Config", "Model", "Tensor", "Images", "Audios",
           "register_execution_provider_library", "set_log_options", "Tokenizer", "TokenizerStream",
           "GeneratorParams", "Generator", "generate", "Llama", "Error", "InvalidArgumentError", "ModelError",
           "UnsupportedError", "MemoryLimitError", "InternalError", "NoSuchFileError", "InvalidProtobufError",
           "NoGraphError", "capi", "build_info", "set_process_memory_limit"]
