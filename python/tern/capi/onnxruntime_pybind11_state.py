"""The exception classes onnxruntime's Python API raises, by the names it gives them. tern raises its own
(tern.Error and its kinds), each also an instance of the class here that onnxruntime raises for the same
failure: an input of the wrong name, type or shape is an InvalidArgument (and a ValueError), a missing file a
NoSuchFile, a file that is not protobuf an InvalidProtobuf, an unsupported op a NotImplemented; other model
failures a Fail. tests/python/test_ort_parity.py checks each against onnxruntime itself."""


class Fail(Exception):
    pass


class InvalidArgument(Exception):
    pass


class NoSuchFile(Exception):
    pass


class NoModel(Exception):
    pass


class EngineError(Exception):
    pass


class RuntimeException(Exception):
    pass


class InvalidProtobuf(Exception):
    pass


class ModelLoaded(Exception):
    pass


class NotImplemented(Exception):  # noqa: A001 (onnxruntime's own name)
    pass


class InvalidGraph(Exception):
    pass


class EPFail(Exception):
    pass
