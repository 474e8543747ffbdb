"""Generation as onnxruntime-genai spells it (Model, Tokenizer, GeneratorParams, Generator), over tern's ring-
buffer KV cache, and a one-call generate().

Each Generator is a sequence of its own on its model's weights (the C API's tern_model_clone: weights loaded
once), so several Generators on one Model run side by side — from several threads too, one thread per
Generator at a time. `tern serve` batches many.
"""
import ctypes
import json
import os
import queue
import threading

import numpy as np

from . import _capi
from ._capi import lib


class _ModelHandle:
    """Owns a tern_model handle — a Model's, or a Generator's clone of it — freed with the object."""

    _handle = None

    def __del__(self):
        if self._handle:
            lib.tern_model_free(self._handle)
            self._handle = None

    def _check(self, status):
        _capi.check(status, lib.tern_model_error, self._handle)

    def _clone(self, model):
        """This object's own sequence on `model`'s weights (a Generator's: tern_model_clone), `model` kept alive."""
        self._model = model
        handle = ctypes.c_void_p()
        status = lib.tern_model_clone(model._handle, ctypes.byref(handle))
        if status != _capi.OK:
            try:
                _capi.check(status, lib.tern_model_error, handle)
            finally:
                lib.tern_model_free(handle)
        self._handle = handle


class Config:
    """onnxruntime-genai's Config: a model folder, and the execution providers asked for. tern runs on the CPU (or
    OpenCL: Model(device="opencl")), so providers are kept and ignored; clear_providers() and append_provider("cpu")
    are what ported code usually calls. overlay() takes genai_config.json's sections that tern has: "search" (the
    GeneratorParams defaults of Models made from this Config) and model.decoder.session_options' intra_op_num_threads."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.providers = []
        self.search = {}
        self.threads = 0

    def clear_providers(self):
        self.providers = []

    def append_provider(self, provider):
        self.providers.append(provider)

    def set_provider_option(self, provider, key, value):
        pass  # (the CPU provider's options are onnxruntime's; tern has none of them)

    def overlay(self, json_text):
        try:
            doc = json.loads(json_text)
        except ValueError as e:
            raise _capi.InvalidArgumentError(f"Config.overlay: not JSON text ({e})", _capi.INVALID_ARGUMENT) from None
        if not isinstance(doc, dict):
            raise _capi.InvalidArgumentError("Config.overlay: a JSON object of genai_config.json's sections", _capi.INVALID_ARGUMENT)
        for section, value in doc.items():
            if section == "search" and isinstance(value, dict):
                for key in value:
                    _check_search_option(key, value[key])
                self.search.update(value)
            elif section == "model" and isinstance(value, dict):
                session = value.get("decoder", {}).get("session_options", {}) if set(value) <= {"decoder"} else None
                if session is None or not set(value.get("decoder", {})) <= {"session_options"} or \
                        not set(session) <= {"intra_op_num_threads", "inter_op_num_threads", "log_id", "provider_options"}:
                    raise _capi.UnsupportedError("Config.overlay: of 'model', tern takes decoder.session_options' "
                                                 "intra_op_num_threads (the model's files are read as they are)",
                                                 _capi.UNSUPPORTED)
                self.threads = int(session.get("intra_op_num_threads", self.threads))
            else:
                raise _capi.UnsupportedError(f"Config.overlay: section '{section}' (tern takes 'search' and "
                                             "'model.decoder.session_options')", _capi.UNSUPPORTED)


class Tensor:
    """onnxruntime-genai's Tensor over a numpy array (as_numpy, shape, type); Generator.append_tokens takes one."""

    def __init__(self, array):
        self._array = np.ascontiguousarray(array)

    def as_numpy(self):
        return self._array

    def shape(self):
        return list(self._array.shape)

    def type(self):
        return str(self._array.dtype)

    def data(self):
        return self._array.ctypes.data


class _Media:
    """onnxruntime-genai's Images and Audios (its multimodal processors' inputs): tern runs text decoders, so
    open() refuses, naming what it was asked for. They exist so that code naming them — genai's own examples'
    common.py annotates with og.Images and og.Audios — imports unchanged."""

    @classmethod
    def open(cls, *paths):
        raise _capi.UnsupportedError(f"{cls.__name__}.open: tern runs text decoders (no image or audio processor)",
                                     _capi.UNSUPPORTED)

    @classmethod
    def open_bytes(cls, *data):
        return cls.open()


class Images(_Media):
    pass


class Audios(_Media):
    pass


def register_execution_provider_library(name, path):
    """genai's plug-in execution providers: tern's kernels are its own (CPU, or OpenCL by Model(device=...))."""
    raise _capi.UnsupportedError(f"register_execution_provider_library('{name}'): tern runs its own kernels "
                                 "(the CPU's, or OpenCL: tern.Model(path, device='opencl'))", _capi.UNSUPPORTED)


_LOG_OPTIONS = {}


def set_log_options(**options):
    """onnxruntime-genai's logging switches (enabled, model_input_values, ...): kept, none printed — tern's library
    logs nothing of a run (tern profile and the Generator's get_logits show what these would)."""
    _LOG_OPTIONS.update(options)


class Model(_ModelHandle):
    """A decoder folder (model.onnx, config.json or genai_config.json, tokenizer) loaded for generation; or an
    onnxruntime-genai Config of one.

    threads: 0 = all cores; window: the KV ring's tokens (0 = the model's context, at most 131072); kv_dtype: the ring's
    storage, "fp32" (default), "fp16", "q8_0" or "q4_0" (the CLI's --kv-dtype); device: "cpu" or
    "opencl"; weights: convert at load ("fp16", "bf16", "int8", "int4"); dtype: which onnx/ variant of an onnx-community
    repository ("fp32", "fp16", "q8", "int8", "uint8", "q4", "q4f16", "bnb4"; default the first present of q4, fp32, q8, …);
    isa: cap the CPU kernels' tier;
    max_memory: bytes this model (its Generators included) may own; other models keep their own caps.
    """

    def __init__(self, path, *, threads=0, window=0, kv_dtype=None, device=None, weights=None, dtype=None, isa=None,
                 max_memory=0):
        self._search = {}
        if isinstance(path, Config):
            self._search = dict(path.search)
            threads = threads or path.threads
            path = path.path
        self._handle = _capi.load("model", os.fspath(path), threads=threads, isa=isa, max_memory=max_memory, window=window,
                                  kv_dtype=kv_dtype, device=device, weights=weights, dtype=dtype)
        self.device_type = "OpenCL" if device and str(device).startswith("opencl") else "CPU"
        info = _capi.ModelInfo()
        self._check(lib.tern_model_get_info(self._handle, ctypes.byref(info)))
        self.vocab_size = info.vocab_size
        self.context_length = info.context_length
        self.window = info.window
        self.bos_token_id = info.bos_token_id if info.bos_token_id >= 0 else None
        self.eos_token_id = info.eos_token_id if info.eos_token_id >= 0 else None

    @property
    def type(self):
        """The model's type as its config names it ("llama", "qwen2", …; "" when it does not)."""
        return lib.tern_model_type(self._handle).decode()

    def set_speculation(self, speculation, draft=None):
        """Speculative decoding for generate(model, …): "ngram" or "ngram:N" (prompt lookup, up to N tokens a step),
        "draft" or "draft:N" with `draft` a Model of the same vocabulary (its greedy continuation; the CLI's
        --draft-model; its weights stay while this model drafts with them), None or "off": none. Greedy text is plain
        decoding's; sampling keeps its distribution."""
        self._check(lib.tern_model_set_speculation(self._handle, speculation.encode() if speculation else None,
                                                   draft._handle if draft is not None else None))

    def sampling_default(self):
        """The model's own sampling, as `tern generate` and `tern serve` take it with no flags: generation_config.json's
        do_sample, temperature, top_k, top_p and repetition_penalty (greedy, temperature 0, when it says nothing)."""
        s = _capi.Sampling()
        self._check(lib.tern_model_sampling_default(self._handle, ctypes.byref(s)))
        return {"temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p, "min_p": s.min_p,
                "repetition_penalty": s.repetition_penalty}


def _sampling(model, temperature=None, top_k=None, top_p=None, min_p=None, repetition_penalty=None, seed=0):
    """The sampling a call asks for: the model's own (Model.sampling_default), each argument given replacing its
    field; temperature 0 is greedy. As the CLI's flags: a top_k, top_p or min_p given over a greedy default samples
    (at temperature 1)."""
    o = model.sampling_default()
    given = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p,
             "repetition_penalty": repetition_penalty}
    if temperature is None and o["temperature"] == 0 and any(v is not None for v in (top_k, top_p, min_p)):
        o["temperature"] = 1.0
    o.update({k: v for k, v in given.items() if v is not None})
    return _capi.Sampling(o["temperature"], o["top_k"], o["top_p"], o["min_p"], o["repetition_penalty"], seed)


def _messages(messages):
    """A conversation (a JSON string or a list of {"role", "content"} dicts) as the C arrays and their count."""
    if isinstance(messages, str):
        messages = json.loads(messages)
    roles = (ctypes.c_char_p * max(len(messages), 1))(*[m["role"].encode() for m in messages])
    contents = (ctypes.c_char_p * max(len(messages), 1))(*[m["content"].encode("utf-8") for m in messages])
    return roles, contents, len(messages)


def _ids(tokens):
    a = np.ascontiguousarray(np.asarray(tokens, dtype=np.int64).reshape(-1))
    if a.size and (a.min() < -2**31 or a.max() >= 2**31):
        raise _capi.InvalidArgumentError(f"token id {int(a.max()) if a.max() >= 2**31 else int(a.min())} "
                                         "is outside int32", _capi.INVALID_ARGUMENT)
    a = a.astype(np.int32)
    return a, a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))


class Tokenizer:
    """The model folder's tokenizer (tokenizer.json or llama2.c's tokenizer.bin)."""

    def __init__(self, model):
        self._model = model

    def _call_ids(self, fn, *args):
        """Calls a tern function that writes token ids into a buffer, growing it once if it was too small."""
        count = ctypes.c_size_t()
        capacity = 256
        while True:
            out = np.empty(capacity, dtype=np.int32)
            status = fn(self._model._handle, *args, out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), capacity,
                        ctypes.byref(count))
            if status == _capi.BUFFER_TOO_SMALL and count.value > capacity:
                capacity = count.value
                continue
            self._model._check(status)
            return out[:count.value].copy()

    def encode(self, text, add_bos=False):
        """Text → token ids (int32): the text's own, as onnxruntime-genai's encode gives them (it adds no special
        tokens since 0.8); add_bos=True begins them with the model's BOS, as tern.generate() and the CLI do."""
        return self._call_ids(lib.tern_tokenize, text.encode("utf-8"), 1 if add_bos else 0)

    def encode_batch(self, texts):
        """Texts → one int32 array [len(texts), longest], shorter rows padded on the right with pad_token_id (as
        onnxruntime-genai's, which returns it as an og.Tensor: here the numpy array its as_numpy() gives)."""
        rows = [self.encode(t) for t in texts]
        pad = self.pad_token_id if self.pad_token_id is not None else 0
        out = np.full((len(rows), max((len(r) for r in rows), default=0)), pad, dtype=np.int32)
        for i, r in enumerate(rows):
            out[i, :len(r)] = r
        return out

    def decode_batch(self, tokens):
        """Rows of token ids (a 2-D array, or an og.Tensor-like object with as_numpy()) → a text per row."""
        a = tokens.as_numpy() if hasattr(tokens, "as_numpy") else np.asarray(tokens)
        return [self.decode(row) for row in np.atleast_2d(a)]

    def to_token_id(self, piece):
        """The id of the vocabulary entry spelled `piece` ("<0xE2>", "<|im_end|>", "▁the")."""
        token = ctypes.c_int32()
        self._model._check(lib.tern_token_id(self._model._handle, piece.encode("utf-8"), ctypes.byref(token)))
        return token.value

    @property
    def bos_token_id(self):
        return self._model.bos_token_id

    @property
    def eos_token_ids(self):
        """The model's end tokens (config.json / generation_config.json may list several), int32."""
        return self._call_ids(lib.tern_model_end_tokens)

    @property
    def pad_token_id(self):
        """The padding token as the model's config names it (None when it does not)."""
        pad = lib.tern_model_pad_token_id(self._model._handle)
        return pad if pad >= 0 else None

    def apply_chat_template(self, messages, template_str=None, tools=None, add_generation_prompt=True):
        """onnxruntime-genai's: a conversation (a JSON string of messages, or the list) → the prompt text, the model's
        Jinja chat template run as transformers runs it (or `template_str`, a template of one's own), with `tools` (a
        JSON string or a list of tool schemas) and, by default, the assistant's turn opened. An empty template_str or
        tools is "not given", as genai's examples pass them. Encode it with encode(): the text holds the template's BOS."""
        doc = messages if isinstance(messages, str) else json.dumps(messages)
        if tools is not None and not isinstance(tools, str):
            tools = json.dumps(tools)
        length = ctypes.c_size_t()
        capacity = 4096
        while True:
            buf = ctypes.create_string_buffer(capacity)
            status = lib.tern_chat_render(self._model._handle, doc.encode(), (tools or "").encode(),
                                          (template_str or "").encode(), int(bool(add_generation_prompt)), buf, capacity,
                                          ctypes.byref(length))
            if status == _capi.BUFFER_TOO_SMALL and length.value + 1 > capacity:
                capacity = length.value + 1
                continue
            self._model._check(status)
            return buf.raw[:length.value].decode("utf-8")

    def encode_chat(self, messages):
        """A conversation → token ids, as `tern chat` feeds it: messages are {"role", "content"} dicts (or a JSON
        string of them) in the model's chat template, ending with the assistant's turn opened."""
        return self._call_ids(lib.tern_chat_tokenize, *_messages(messages))

    def decode(self, tokens):
        """Token ids → text."""
        a, p = _ids(tokens)
        length = ctypes.c_size_t()
        capacity = 4 * a.size + 64
        while True:
            buf = ctypes.create_string_buffer(capacity)
            status = lib.tern_detokenize(self._model._handle, p, a.size, buf, capacity, ctypes.byref(length))
            if status == _capi.BUFFER_TOO_SMALL and length.value + 1 > capacity:
                capacity = length.value + 1
                continue
            self._model._check(status)
            return buf.raw[:length.value].decode("utf-8", errors="replace")

    def create_stream(self, context=()):
        return TokenizerStream(self._model, context)


class TokenizerStream:
    """decode(token) gives the text that token completes (whole characters, possibly ""), as
    onnxruntime-genai's stream does; flush() what is held back at the end."""

    def __init__(self, model, context=()):
        self._model = model
        a, p = _ids(context)
        handle = ctypes.c_void_p()
        model._check(lib.tern_text_stream_create(model._handle, p, a.size, ctypes.byref(handle)))
        self._handle = handle

    def __del__(self):
        if getattr(self, "_handle", None):
            lib.tern_text_stream_free(self._handle)
            self._handle = None

    def _text(self, fn, *args):
        ptr, length = ctypes.c_void_p(), ctypes.c_size_t()
        self._model._check(fn(self._handle, *args, ctypes.byref(ptr), ctypes.byref(length)))
        return ctypes.string_at(ptr, length.value).decode("utf-8", errors="replace") if length.value else ""

    def decode(self, token):
        return self._text(lib.tern_text_stream_push, int(token))

    def flush(self):
        return self._text(lib.tern_text_stream_flush)


# The search options onnxruntime-genai takes that tern carries out, and their defaults where the model's
# generation_config.json says nothing.
_SEARCH_DEFAULTS = {"max_length": None, "min_length": 0, "do_sample": False, "temperature": 1.0, "top_k": 0,
                    "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0, "random_seed": 0, "batch_size": 1,
                    "num_beams": 1, "num_return_sequences": 1, "length_penalty": 1.0, "early_stopping": True,
                    "chunk_size": 0}


def _check_search_option(key, value):
    """A search option's name and value, as GeneratorParams.set_search_options and Config.overlay take them.
    (chunk_size, genai's prefill chunking, changes no token: tern prefills a prompt whole.)"""
    if key not in _SEARCH_DEFAULTS:
        raise _capi.InvalidArgumentError(f"search option '{key}' (tern takes {', '.join(_SEARCH_DEFAULTS)})",
                                         _capi.INVALID_ARGUMENT)
    if key in ("batch_size", "num_beams", "num_return_sequences") and (not isinstance(value, int) or value < 1):
        raise _capi.InvalidArgumentError(f"{key} {value}: at least 1", _capi.INVALID_ARGUMENT)


def _lark_json_schema(grammar):
    """The schema of a Lark grammar (llguidance's dialect) whose start rule is, through rules of one name each, one
    `%json {schema}`; anything else is refused naming the rule tern cannot take."""
    rules = {}
    for line in grammar.splitlines():
        if line.strip() and not line.strip().startswith("//"):
            name, colon, body = line.partition(":")
            if not colon or not name.strip():
                raise _capi.UnsupportedError(f"set_guidance: lark line {line.strip()!r} is not 'name: body'", _capi.UNSUPPORTED)
            rules[name.strip()] = body.strip()
    name = "start"
    for _ in range(len(rules) + 1):
        body = rules.get(name)
        if body is None:
            raise _capi.InvalidArgumentError(f"set_guidance: the lark grammar has no rule '{name}'", _capi.INVALID_ARGUMENT)
        if body.startswith("%json"):
            return body[len("%json"):].strip()
        if not body.replace("_", "").isalnum():
            raise _capi.UnsupportedError(f"set_guidance: lark rule '{name}: {body[:60]}' (tern takes a start that is "
                                         "one %json rule: text, alternatives and tool-call tokens are not constrained "
                                         "here)", _capi.UNSUPPORTED)
        name = body
    raise _capi.InvalidArgumentError("set_guidance: the lark grammar's rules name each other in a loop", _capi.INVALID_ARGUMENT)


class GeneratorParams:
    """Search options: max_length (prompt + new tokens; default the model's context), min_length (no end token
    before it), do_sample, temperature, top_k, top_p, min_p, repetition_penalty, random_seed — starting from the
    model's own sampling (Model.sampling_default: its generation_config.json, as the CLI and tern serve).
    batch_size B: B sequences (Generator). num_beams > 1: beam search (Hugging Face's and genai's), with
    num_return_sequences, length_penalty and early_stopping."""

    def __init__(self, model):
        self._model = model
        self.search = dict(_SEARCH_DEFAULTS)
        own = model.sampling_default()
        if own["temperature"] > 0:
            self.search.update(own, do_sample=True)
        else:
            self.search["repetition_penalty"] = own["repetition_penalty"]
        self.search.update(model._search)  # (a Config's overlay)
        self.guidance = None

    def set_search_options(self, **options):
        for key, value in options.items():
            _check_search_option(key, value)
            self.search[key] = value

    def set_guidance(self, type, data, enable_ff_tokens=False):
        """genai's constrained decoding: type "json_schema" (data: a JSON schema whose top level is an object or an
        array, of the subset tern serve's response_format takes — genai's tool-call arrays included) or
        "json_object"; the sequence ends once the value is whole. "lark_grammar" is taken where its start is one
        %json rule (`start: call` / `call: %json {...}`, what genai's examples write for a tool call without
        tool-call tokens); other Lark and "regex" are refused naming what tern lacks: its constraint is JSON's."""
        if type == "lark_grammar":
            data = _lark_json_schema(data)
        elif type not in ("json_schema", "json_object"):
            raise _capi.UnsupportedError(f"set_guidance: type '{type}' (tern constrains to JSON: json_schema, "
                                         "json_object, or a lark_grammar whose start is one %json rule)", _capi.UNSUPPORTED)
        self.guidance = data if type != "json_object" else ""

    def _max_length(self):
        """The search's max_length: prompt and new tokens (default: the model's context, else its window)."""
        return self.search["max_length"] or self._model.context_length or self._model.window

    def _sampling(self):
        s = _capi.Sampling()
        lib.tern_sampling_default(ctypes.byref(s))
        o = self.search
        if o["do_sample"]:
            s.temperature, s.top_k, s.top_p, s.min_p = o["temperature"], o["top_k"], o["top_p"], o["min_p"]
            s.seed = o["random_seed"]
        s.repetition_penalty = o["repetition_penalty"]
        return s


class _Sequence(_ModelHandle):
    """One sequence of a Generator: a clone of the model's handle (its weights shared), its tokens, and the last
    token chosen but not yet fed."""

    def __init__(self, model, params):
        self._clone(model)  # this Generator's sequence
        self._max_length = params._max_length()
        self._check(lib.tern_model_set_sampling(self._handle, ctypes.byref(params._sampling())))
        self._guidance = params.guidance  # (set at the first generated token: its budget is what max_length leaves)
        self._guided = False
        self._min_length = params.search["min_length"]
        self._ends = Tokenizer(model).eos_token_ids if self._min_length else []
        self._sequence = []
        self._unfed = None  # the last token chosen, fed by the next generate_next_token
        self._done = False

    def _feed(self, ids):
        a, p = _ids(ids)
        self._check(lib.tern_model_prefill(self._handle, p, a.size))

    def append_tokens(self, tokens, pad=None):
        """Feeds tokens (the prompt, or more later) after the sequence; with `pad`, a batch row's trailing padding
        is kept in the sequence (as genai's get_sequence shows it) but not fed."""
        new = [int(t) for t in np.asarray(tokens).reshape(-1)]
        real = len(new)
        while pad is not None and real > 0 and new[real - 1] == pad:
            real -= 1
        pending = ([self._unfed] if self._unfed is not None else []) + new[:real]
        if pending:
            self._feed(pending)
        self._unfed = None
        self._sequence += new
        self._done = len(self._sequence) >= self._max_length

    def generate_next_token(self):
        """Runs the model on what is not yet fed and chooses the next token."""
        if self._done:
            raise _capi.InvalidArgumentError("the generator is done (is_done())", _capi.INVALID_ARGUMENT)
        self._feed_unfed()
        if self._guidance is not None and not self._guided:
            left = max(1, self._max_length - len(self._sequence))
            self._check(lib.tern_model_set_json_schema(self._handle, self._guidance.encode(), left))
            self._guided = True
        if len(self._sequence) < self._min_length and len(self._ends):  # no end token yet: theirs at -inf
            logits = self._logits()
            logits[self._ends] = -np.inf
            self._set_logits(logits)
        token = ctypes.c_int32()
        self._check(lib.tern_model_sample(self._handle, ctypes.byref(token)))
        self._sequence.append(token.value)
        self._unfed = token.value
        if lib.tern_model_is_end_token(self._handle, token.value) or len(self._sequence) >= self._max_length or \
                (self._guided and lib.tern_model_constraint_done(self._handle)):
            self._done = True

    def is_done(self):
        return self._done

    def get_next_tokens(self):
        return np.array(self._sequence[-1:], dtype=np.int32)

    def get_sequence(self, index=0):
        if index != 0:
            raise _capi.InvalidArgumentError(f"sequence {index}: tern.Generator runs one (0)", _capi.INVALID_ARGUMENT)
        return np.array(self._sequence, dtype=np.int32)

    def _feed_unfed(self):
        if self._unfed is not None:  # the last chosen token's logits need it fed first
            self._feed([self._unfed])
            self._unfed = None

    def _logits(self):
        ptr, vocab = ctypes.POINTER(ctypes.c_float)(), ctypes.c_int64()
        self._check(lib.tern_model_logits(self._handle, ctypes.byref(ptr), ctypes.byref(vocab)))
        return np.ctypeslib.as_array(ptr, shape=(vocab.value,)).copy()

    def _set_logits(self, logits):
        a = np.ascontiguousarray(np.asarray(logits, dtype=np.float32).reshape(-1))
        self._check(lib.tern_model_set_logits(self._handle, a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), a.size))

    def get_logits(self):
        """The logits the next choice is made from: float32, shape (1, 1, vocab) as onnxruntime-genai's (batch,
        new tokens, vocab)."""
        self._feed_unfed()
        return self._logits().reshape(1, 1, -1)

    def set_logits(self, logits):
        """Replaces the logits the next choice is made from (vocab floats, any shape holding them)."""
        self._feed_unfed()
        self._set_logits(logits)

    def rewind_to(self, new_length):
        """Keeps the first new_length tokens of the sequence (the prompt, say) and forgets the rest, cache too;
        generation goes on from there (append_tokens, or generate_next_token)."""
        if not 0 <= new_length <= len(self._sequence):
            raise _capi.InvalidArgumentError(f"rewind_to({new_length}): the sequence holds {len(self._sequence)} "
                                             "tokens", _capi.INVALID_ARGUMENT)
        fed = len(self._sequence) - (self._unfed is not None)
        if new_length <= fed:
            # The cache keeps new_length - 1 tokens and the last kept one is fed again by the next call, whose
            # logits then choose what follows it.
            self._check(lib.tern_model_rewind(self._handle, max(new_length - 1, 0)))
            self._unfed = self._sequence[new_length - 1] if new_length else None
        self._sequence = self._sequence[:new_length]
        self._done = False


class Generator:
    """onnxruntime-genai's generate loop:

        generator = tern.Generator(model, params)
        generator.append_tokens(tokenizer.encode(prompt))
        while not generator.is_done():
            generator.generate_next_token()
            print(stream.decode(generator.get_next_tokens()[0]), end="")

    With search option batch_size B, append_tokens takes B rows (tokenizer.encode_batch's, right-padded with
    pad_token_id): each row is a sequence of its own on the model's weights (a clone each; their padding kept in
    get_sequence, as genai's, but never fed), get_next_tokens gives B tokens and get_logits (B, 1, vocab)."""

    def __new__(cls, model, params):
        o = params.search
        if o["num_return_sequences"] > o["num_beams"]:
            raise _capi.InvalidArgumentError(f"num_return_sequences {o['num_return_sequences']}: at most num_beams "
                                             f"({o['num_beams']})", _capi.INVALID_ARGUMENT)
        if cls is Generator and o["num_beams"] > 1:
            return super().__new__(_BeamSearch)
        return super().__new__(cls)

    def __init__(self, model, params):
        self._rows = [_Sequence(model, params) for _ in range(params.search["batch_size"])]
        self._pad = Tokenizer(model).pad_token_id
        if self._pad is None:
            self._pad = model.eos_token_id if model.eos_token_id is not None else 0

    def append_tokens(self, tokens):
        """Feeds tokens after each sequence: one row (or a flat list) for a batch of one, else one row each."""
        a = np.asarray(tokens.as_numpy() if hasattr(tokens, "as_numpy") else tokens)
        if len(self._rows) == 1:
            return self._rows[0].append_tokens(a)
        if a.ndim != 2 or a.shape[0] != len(self._rows):
            raise _capi.InvalidArgumentError(f"append_tokens: {len(self._rows)} rows expected (batch_size), got shape "
                                             f"{list(a.shape)}", _capi.INVALID_ARGUMENT)
        for row, tokens_of_row in zip(self._rows, a):
            row.append_tokens(tokens_of_row, pad=self._pad)

    def generate_next_token(self):
        """Chooses each unfinished sequence's next token; a finished one is padded, so all keep one length."""
        if self.is_done():
            raise _capi.InvalidArgumentError("the generator is done (is_done())", _capi.INVALID_ARGUMENT)
        for row in self._rows:
            if row.is_done():
                row._sequence.append(self._pad)
            else:
                row.generate_next_token()

    def is_done(self):
        return all(row.is_done() for row in self._rows)

    def get_next_tokens(self):
        return np.array([row._sequence[-1] for row in self._rows], dtype=np.int32)

    def token_count(self):
        """Tokens in a sequence: the prompt and those generated (a batch's rows keep one length)."""
        return len(self._rows[0]._sequence)

    def get_sequence(self, index=0):
        if not 0 <= index < len(self._rows):
            raise _capi.InvalidArgumentError(f"sequence {index}: the batch holds {len(self._rows)}", _capi.INVALID_ARGUMENT)
        return self._rows[index].get_sequence()

    def get_logits(self):
        """The logits the next choices are made from: float32, (batch, 1, vocab) as onnxruntime-genai's."""
        return np.concatenate([row.get_logits() for row in self._rows])

    def set_logits(self, logits):
        """Replaces the logits the next choices are made from: (batch, …, vocab)."""
        a = np.asarray(logits, dtype=np.float32).reshape(len(self._rows), -1)
        for row, values in zip(self._rows, a):
            row.set_logits(values)

    def get_output(self, name):
        """A graph output after the last run: "logits" (as get_logits). tern keeps no other output of a step."""
        if name != "logits":
            raise _capi.UnsupportedError(f"get_output('{name}'): tern.Generator keeps only the logits of a step",
                                         _capi.UNSUPPORTED)
        return self.get_logits()

    def rewind_to(self, new_length):
        """Keeps the first new_length tokens of each sequence and forgets the rest, cache too."""
        for row in self._rows:
            row.rewind_to(new_length)


class _BeamSearch(Generator, _ModelHandle):
    """A Generator with num_beams > 1 (GeneratorParams): the C API's beam search on a clone of the model's handle.
    append_tokens takes the prompts (batch_size rows); each generate_next_token is one step of every beam;
    get_next_tokens gives each beam's last token (num_beams a prompt, the best first); get_sequence(i) the
    (i % num_return_sequences)-th best of prompt i // num_return_sequences, prompt included."""

    def __init__(self, model, params):
        self._clone(model)
        self._search = dict(params.search)
        self._max_length = params._max_length()
        self._pad = Tokenizer(model).pad_token_id
        self._prompts = None
        self._steps = 0
        self._started = self._done = False

    def append_tokens(self, tokens):
        """The prompts, before the first generate_next_token: one row (or a flat list) per prompt, batch_size rows;
        a row's trailing padding (pad_token_id) is not part of its prompt."""
        if self._started:
            raise _capi.UnsupportedError("append_tokens after a beam search has begun: tern's beams take their "
                                         "prompts once", _capi.UNSUPPORTED)
        a = np.asarray(tokens.as_numpy() if hasattr(tokens, "as_numpy") else tokens)
        rows = [a.reshape(-1)] if a.ndim < 2 else list(a)
        if len(rows) != self._search["batch_size"]:
            raise _capi.InvalidArgumentError(f"append_tokens: {self._search['batch_size']} rows expected (batch_size),"
                                             f" got shape {list(a.shape)}", _capi.INVALID_ARGUMENT)
        prompts = []
        for row in rows:
            row = [int(t) for t in row]
            while len(rows) > 1 and self._pad is not None and len(row) > 1 and row[-1] == self._pad:
                row.pop()
            prompts.append(row)
        self._prompts = prompts

    def generate_next_token(self):
        """One token on every running beam (the first call feeds the prompts)."""
        if self._done:
            raise _capi.InvalidArgumentError("the generator is done (is_done())", _capi.INVALID_ARGUMENT)
        if not self._started:
            self._start()
        done = ctypes.c_int()
        self._check(lib.tern_beam_search_step(self._handle, ctypes.byref(done)))
        self._steps += 1
        self._done = bool(done.value)

    def _start(self):
        if not self._prompts:
            raise _capi.InvalidArgumentError("no prompt: append_tokens first", _capi.INVALID_ARGUMENT)
        o, longest = self._search, max(len(p) for p in self._prompts)
        options = _capi.BeamOptions()
        lib.tern_beam_options_default(ctypes.byref(options))
        options.num_beams, options.num_return_sequences = o["num_beams"], o["num_return_sequences"]
        options.length_penalty, options.early_stopping = o["length_penalty"], 1 if o["early_stopping"] else 0
        options.max_new_tokens = max(self._max_length - longest, 0)  # (max_length counts the prompt, as genai's)
        options.min_new_tokens = max(o["min_length"] - longest, 0)
        arrays = [np.ascontiguousarray(p, dtype=np.int32) for p in self._prompts]
        pointers = (ctypes.POINTER(ctypes.c_int32) * len(arrays))(
            *[a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)) for a in arrays])
        lengths = (ctypes.c_size_t * len(arrays))(*[a.size for a in arrays])
        self._check(lib.tern_beam_search_start(self._handle, pointers, lengths, len(arrays), ctypes.byref(options)))
        self._started = True
        self._done = options.max_new_tokens == 0

    def is_done(self):
        return self._done

    def token_count(self):
        """Tokens in a beam: the (longest) prompt and one a step."""
        return (max(len(p) for p in self._prompts) if self._prompts else 0) + self._steps

    def _ids(self, fn, *args):
        ptr, count = ctypes.POINTER(ctypes.c_int32)(), ctypes.c_size_t()
        self._check(fn(self._handle, *args, ctypes.byref(ptr), ctypes.byref(count)))
        return np.ctypeslib.as_array(ptr, shape=(count.value,)).copy() if count.value else np.zeros(0, np.int32)

    def get_next_tokens(self):
        if not self._started:
            return np.zeros(0, np.int32)
        return self._ids(lib.tern_beam_search_tokens)

    def get_sequence(self, index=0):
        if not self._started:
            self._start()
        return self._ids(lib.tern_beam_search_sequence, ctypes.c_size_t(index))

    def _not_with_beams(self, what):
        raise _capi.UnsupportedError(f"{what}: tern's beam search keeps no logits of its own between steps",
                                     _capi.UNSUPPORTED)

    def get_logits(self):
        self._not_with_beams("get_logits")

    def set_logits(self, logits):
        self._not_with_beams("set_logits")

    def get_output(self, name):
        self._not_with_beams(f"get_output('{name}')")

    def rewind_to(self, new_length):
        self._not_with_beams("rewind_to")


def generate(model, prompt, max_new_tokens=128, *, stop=(), chat=False, on_text=None, temperature=None, top_k=None,
             top_p=None, min_p=None, repetition_penalty=None, seed=0):
    """The whole job in one call: `prompt` (with BOS; chat=True: one user turn in the model's chat template)
    continued by up to max_new_tokens tokens with the model's own sampling (its generation_config.json, as
    `tern generate` with no flags), each sampling argument given replacing its part (temperature=0: greedy). Stops
    at an end token or a stop string (not included). on_text(piece) is called as text arrives; returns the new
    text. `model` is a Model or a model folder's path."""
    if not isinstance(model, Model):
        model = Model(model)
    s = _sampling(model, temperature, top_k, top_p, min_p, repetition_penalty, seed)
    stops = [x.encode("utf-8") for x in ([stop] if isinstance(stop, str) else stop)]
    stop_array = (ctypes.c_char_p * max(len(stops), 1))(*stops)
    params = _capi.GenerateParams(max_new_tokens, ctypes.pointer(s), stop_array, len(stops), 1 if chat else 0)
    pieces, failure = [], []

    def deliver(ptr, length, _user):
        try:
            piece = ctypes.string_at(ptr, length).decode("utf-8", errors="replace")
            pieces.append(piece)
            if on_text is not None:
                on_text(piece)
            return 0
        except BaseException as e:  # raised again below, after tern has stopped
            failure.append(e)
            return 1

    callback = _capi.TEXT_CALLBACK(deliver)
    model._check(lib.tern_generate(model._handle, prompt.encode("utf-8"), ctypes.byref(params), callback, None, None))
    if failure:
        raise failure[0]
    return "".join(pieces)


class Llama:
    """llama-cpp-python's chat API over a tern model folder (or a .gguf file):

        llm = tern.Llama("models/smollm2-135m-instruct", n_threads=2)
        reply = llm.create_chat_completion(messages=[{"role": "user", "content": "Hi"}])
        print(reply["choices"][0]["message"]["content"])

    create_chat_completion answers as `tern serve` answers POST /v1/chat/completions — the same request parsing,
    prompt, sampling, generation and reply shapes (the C API's tern_chat_completion) — as an OpenAI-shaped dict, or
    with stream=True an iterator of chunk dicts. Sampling left unset is the model's own (generation_config.json),
    not llama-cpp-python's fixed defaults. n_ctx: the ring cache's window (0: the model's context)."""

    def __init__(self, model_path, *, n_threads=0, n_ctx=0, verbose=False, **model_options):
        self.model = Model(model_path, threads=n_threads, window=n_ctx, **model_options)
        self._lock = threading.Lock()  # (one request at a time on the model's sequence)

    def create_chat_completion(self, messages, *, temperature=None, top_p=None, top_k=None, min_p=None,
                               repeat_penalty=None, seed=None, stop=None, max_tokens=None, n=None, stream=False,
                               response_format=None, logprobs=None, top_logprobs=None, model=None):
        body = {"messages": messages, "stream": bool(stream)}
        for key, value in (("temperature", temperature), ("top_p", top_p), ("top_k", top_k), ("min_p", min_p),
                           ("repetition_penalty", repeat_penalty), ("seed", seed), ("stop", stop),
                           ("max_tokens", max_tokens), ("n", n), ("response_format", response_format),
                           ("logprobs", logprobs), ("top_logprobs", top_logprobs), ("model", model)):
            if value is not None:
                body[key] = value
        request = json.dumps(body).encode("utf-8")
        if not stream:
            with self._lock:
                return json.loads(self._complete(request, None))
        return self._stream(request)

    def _complete(self, request, on_chunk):
        callback = _capi.TEXT_CALLBACK(on_chunk or (lambda ptr, length, user: 0))
        ptr, length = ctypes.c_void_p(), ctypes.c_size_t()
        self.model._check(lib.tern_chat_completion(self.model._handle, request, callback, None, ctypes.byref(ptr),
                                                   ctypes.byref(length)))
        return ctypes.string_at(ptr, length.value).decode("utf-8") if length.value else ""

    def _stream(self, request):
        """The chunks as tern makes them: generation runs on a thread of its own; leaving the iteration early stops
        it at its next token."""
        chunks, closed, end = queue.Queue(), threading.Event(), object()

        def on_chunk(ptr, length, _user):
            chunks.put(ctypes.string_at(ptr, length).decode("utf-8"))
            return 1 if closed.is_set() else 0

        def work():
            try:
                with self._lock:
                    self._complete(request, on_chunk)
            except BaseException as e:  # raised again in the caller's thread
                chunks.put(e)
            chunks.put(end)

        threading.Thread(target=work, daemon=True).start()
        try:
            while (item := chunks.get()) is not end:
                if isinstance(item, BaseException):
                    raise item
                yield json.loads(item)
        finally:
            closed.set()
