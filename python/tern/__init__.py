"""tern: run ONNX transformer language models without ONNX Runtime.

    import tern
    sess = tern.InferenceSession("model.onnx")          # as onnxruntime.InferenceSession
    outputs = sess.run(None, {"input": array})

    model = tern.Model("models/default")                # as onnxruntime_genai.Model
    print(tern.generate(model, "And God said", max_new_tokens=40))

docs/python.md has the API and notes for porting from onnxruntime and onnxruntime-genai.
"""
from ._capi import (Error, InternalError, InvalidArgumentError, MemoryLimitError, ModelError, UnsupportedError,
                    lib as _lib)
from .genai import Generator, GeneratorParams, Model, Tokenizer, TokenizerStream, generate
from .session import (ExecutionMode, GraphOptimizationLevel, InferenceSession, NodeArg, NodeProfile, RunOptions,
                      SessionOptions, get_available_providers, get_device)

__version__ = _lib.tern_version().decode()
build_info = _lib.tern_build_info().decode()

__all__ = ["InferenceSession", "SessionOptions", "RunOptions", "NodeArg", "NodeProfile", "GraphOptimizationLevel",
           "ExecutionMode", "get_available_providers", "get_device", "Model", "Tokenizer", "TokenizerStream",
           "GeneratorParams", "Generator", "generate", "Error", "InvalidArgumentError", "ModelError",
           "UnsupportedError", "MemoryLimitError", "InternalError", "build_info"]
