/* tern — the C API (C99). Run ONNX transformer language models from C, or from any language with a C FFI.
 *
 * Example (tests/header_example.sh writes it out; a test compiles it as C99 and runs it):
 *   #include <stdio.h>
 *   #include <tern/tern.h>
 *
 *   static int on_text(const char* text, size_t length, void* user_data) {
 *     (void)user_data;
 *     fwrite(text, 1, length, stdout);  // each piece of new text, whole UTF-8 characters
 *     return 0;                         // non-zero stops the generation
 *   }
 *
 *   int main(void) {
 *     tern_options* o = tern_options_create();
 *     tern_options_set_threads(o, 2);
 *     tern_generate_params params;
 *     tern_generate_params_default(&params);
 *     params.max_new_tokens = 32;
 *     tern_model* m = NULL;
 *     tern_status s = tern_model_load("models/default", o, &m);  // m is set even on failure
 *     if (s == TERN_OK) s = tern_generate(m, "Once upon a time", &params, on_text, NULL, NULL);
 *     if (s != TERN_OK) fprintf(stderr, "tern: %s\n", tern_model_error(m));
 *     tern_model_free(m);
 *     tern_options_free(o);
 *     return s == TERN_OK ? 0 : 1;
 *   }
 *
 * Handles are opaque. Every function that can fail returns a tern_status; the message of the last failure is
 * kept by the handle it happened on (tern_model_error, tern_graph_error). A load that fails still gives a
 * handle holding only its message (as sqlite3_open does), so the error can be read; free it as usual.
 * No C++ exception crosses this boundary: failures inside tern (a corrupt file, an unsupported op, the memory
 * cap, a bad token id) come back as statuses.
 *
 * Threads: functions on distinct handles may run at once on different threads. A tern_graph may be run from
 * several threads at once (tern_graph_run, as ONNX Runtime's Run): each thread gets its own outputs and its own
 * last error (tern_graph_error). A tern_model is one sequence and is used by one thread at a time; for several
 * sequences at once on one set of weights, tern_model_clone it — a handle per thread. tern_version,
 * tern_build_info, tern_status_name and tern_set_process_memory_limit may be called from any thread at any
 * time. Work inside a call uses the number of threads its handle's options set, whatever other handles use.
 *
 * Memory: strings and arrays a function returns belong to the handle and stay valid until the next call on
 * that handle (or its free), unless a function says otherwise. Buffers the caller passes in stay the caller's.
 */
#ifndef TERN_TERN_H
#define TERN_TERN_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define TERN_API
#elif defined(__GNUC__)
#define TERN_API __attribute__((visibility("default")))
#else
#define TERN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The API's version: a new function raises the minor, a change to an existing one the major. */
#define TERN_API_VERSION_MAJOR 2
#define TERN_API_VERSION_MINOR 5

typedef enum tern_status {
  TERN_OK = 0,
  TERN_ERROR_INVALID_ARGUMENT = 1, /* a NULL handle or pointer, a value out of range, an unknown name; a run's
                                      input missing or of a name, type or shape the graph lacks (API 2.0:
                                      TERN_ERROR_MODEL before) */
  TERN_ERROR_MODEL = 2,            /* a file missing, unreadable, corrupt or hostile */
  TERN_ERROR_UNSUPPORTED = 3,      /* an op, data type or feature tern does not implement (or this build lacks) */
  TERN_ERROR_MEMORY_LIMIT = 4,     /* the memory cap (tern_options_set_max_memory) or the machine's memory */
  TERN_ERROR_BUFFER_TOO_SMALL = 5, /* the caller's buffer: the size needed is returned beside it */
  TERN_ERROR_INTERNAL = 6          /* anything else: a bug in tern; the message says what */
} tern_status;

/* "ok", "invalid argument", … (a static string). */
TERN_API const char* tern_status_name(tern_status status);
/* "0.1.0" (a static string). */
TERN_API const char* tern_version(void);
/* One line: version and commit, compiler, the CPU kernels' ISA tier in use, whether OpenCL is built in (static). */
TERN_API const char* tern_build_info(void);

/* ---- Options: how a model or graph is loaded ------------------------------------------------------------ */

typedef struct tern_options tern_options;

/* Defaults: all cores, the CPU, weights as stored, the model's context as window, no memory cap beyond the
 * machine's. NULL only when out of memory. */
TERN_API tern_options* tern_options_create(void);
TERN_API void tern_options_free(tern_options* options);
/* The message of the last setter that failed on these options ("" when none). */
TERN_API const char* tern_options_error(const tern_options* options);
/* Threads for the kernels; 0 = all cores. */
TERN_API tern_status tern_options_set_threads(tern_options* options, int threads);
/* The CPU kernels' ISA tier for models and graphs loaded with these options: "avx2", "avxvnni", "avx512", "avx512vnni",
 * "avx512bf16", "amx" on x86-64 (a name of the other architecture, or a tier this CPU cannot run, is refused), "neon", "neondot",
 * "neoni8mm" on AArch64. Unset: TERN_ISA's, else the machine's highest. Per load: two models in one process may run at two tiers. */
TERN_API tern_status tern_options_set_isa(tern_options* options, const char* isa);
/* Host memory one handle loaded with these options may own: its weights, caches, activations, in bytes; 0 = no
 * cap of its own. A load or run that would pass it fails with TERN_ERROR_MEMORY_LIMIT; other handles keep their
 * own caps (a model's clones share its cap: they share its session). */
TERN_API tern_status tern_options_set_max_memory(tern_options* options, uint64_t bytes);
/* Host memory all of tern in this process may own, over every handle; 0 = the machine's physical memory (the
 * default). Never set by a load. (API 1.2) */
TERN_API tern_status tern_set_process_memory_limit(uint64_t bytes);
/* Generation: the KV cache's window in tokens (a ring buffer that slides past the context; keys are stored
 * before RoPE). 0 = the model's context length, at most 131072 (4096 when the model does not say). */
TERN_API tern_status tern_options_set_window(tern_options* options, int64_t tokens);
/* Generation: the ring's storage, "fp32" (the default), "fp16", "q8_0" or "q4_0" (llama.cpp's blocks of 32 with an fp16
 * scale: 0.53x and 0.28x of fp16's bytes per token; docs in bench/README.md, "The quantized ring"). A quantized ring
 * needs a head size that is a multiple of 32; a model whose is not fails at load naming both. (API 2.4) */
TERN_API tern_status tern_options_set_kv_dtype(tern_options* options, const char* kv_dtype);
/* "cpu", "opencl" or "opencl:N" (TERN_ERROR_UNSUPPORTED at load when the build has no OpenCL). */
TERN_API tern_status tern_options_set_device(tern_options* options, const char* device);
/* Weights converted at load: "fp32" (as stored), "fp16", "bf16", "int8", "int4". */
TERN_API tern_status tern_options_set_weights(tern_options* options, const char* format);
/* A Hugging Face onnx-community / transformers.js repository's variant in its onnx/ folder: "fp32", "fp16", "q8",
 * "int8", "uint8", "q4", "q4f16", "bnb4" (the CLI's --dtype). Unset: the first present of q4, fp32, q8, int8, uint8,
 * fp16, q4f16, bnb4. A load of anything but such a repository with a dtype set fails. (API 2.2) */
TERN_API tern_status tern_options_set_dtype(tern_options* options, const char* dtype);
/* Non-zero: graphs loaded with these options record every node's time, kernel and cost (tern_graph_profile).
 * Off by default: no clock is read. (API 1.1) */
TERN_API tern_status tern_options_set_profiling(tern_options* options, int on);
/* (graphs) onnxruntime's add_free_dimension_override_by_name: the inputs' dim named `name` is `value` (fixed before
 * shape inference; feeds must have it). (API 2.0) */
TERN_API tern_status tern_options_set_dim(tern_options* options, const char* name, int64_t value);

/* ---- Tensors ------------------------------------------------------------------------------------------ */

typedef enum tern_dtype {
  TERN_UNDEFINED = 0, /* only in tern_value_info: the graph does not say (API 1.1) */
  TERN_FLOAT32 = 1,
  TERN_UINT8 = 2,
  TERN_INT8 = 3,
  TERN_UINT16 = 4, /* (API 1.1) */
  TERN_INT16 = 5,  /* (API 1.1) */
  TERN_INT32 = 6,
  TERN_INT64 = 7,
  TERN_BOOL = 9,
  TERN_FLOAT16 = 10,
  TERN_FLOAT64 = 11,  /* (API 1.1) */
  TERN_UINT32 = 12,   /* (API 1.1) */
  TERN_UINT64 = 13,   /* (API 1.1) */
  TERN_BFLOAT16 = 16, /* values are ONNX's TensorProto.DataType numbers */
  TERN_UINT4 = 21,    /* 4-bit: two elements a byte, the first in the low nibble, as ONNX packs them (API 1.1) */
  TERN_INT4 = 22      /* (API 1.1) */
} tern_dtype;

#define TERN_MAX_DIMS 8

typedef struct tern_tensor {
  const char* name; /* the graph input or output */
  tern_dtype dtype;
  int32_t rank; /* 0 … TERN_MAX_DIMS */
  int64_t shape[TERN_MAX_DIMS];
  void* data;   /* row-major elements */
  size_t bytes; /* of data's buffer */
} tern_tensor;

/* (graphs) onnxruntime's add_initializer: the initializer tensor->name is replaced by the caller's tensor (the same
 * dtype and shape, else the load fails naming both), read in place: its data must outlive every graph loaded with
 * these options. (API 2.0) */
TERN_API tern_status tern_options_add_initializer(tern_options* options, const tern_tensor* tensor);

/* ---- Graphs: any ONNX model, run on named tensors ----------------------------------------------------- */

typedef struct tern_graph tern_graph;

/* Loads an .onnx file (external data beside it), or a .gguf file's graph (imported once into tern's cache
 * folder, as tern_model_load does; API 1.3). `options` may be NULL. *graph is set unless out of memory;
 * on failure it holds the message (tern_graph_error): free it with tern_graph_free. */
TERN_API tern_status tern_graph_load(const char* onnx_path, const tern_options* options, tern_graph** graph);
TERN_API void tern_graph_free(tern_graph* graph);
TERN_API const char* tern_graph_error(const tern_graph* graph);
/* The graph's inputs and outputs: count, then name and element type by index (names valid while the graph
 * lives). */
/* What the model file says of itself, as a JSON object: producer_name, graph_name, domain, description,
 * graph_description, version and custom_metadata_map (its metadata_props) — onnxruntime's ModelMetadata. Valid while
 * the graph lives; NULL for a graph that did not load. (API 2.0) */
TERN_API const char* tern_graph_metadata(const tern_graph* graph);
TERN_API size_t tern_graph_input_count(const tern_graph* graph);
TERN_API size_t tern_graph_output_count(const tern_graph* graph);
TERN_API const char* tern_graph_input_name(const tern_graph* graph, size_t index);
TERN_API const char* tern_graph_output_name(const tern_graph* graph, size_t index);
/* What the graph declares of an input or output: name, element type (TERN_UNDEFINED when it does not say),
 * rank (-1 when it does not say) and dims; a dim that is not a fixed size is -1, with its symbol in
 * dim_names (e.g. "batch_size") or NULL when unnamed. Strings valid while the graph lives. (API 1.1) */
typedef struct tern_value_info {
  const char* name;
  tern_dtype dtype;
  int32_t rank;
  int64_t shape[TERN_MAX_DIMS];
  const char* dim_names[TERN_MAX_DIMS];
} tern_value_info;
TERN_API tern_status tern_graph_input_info(const tern_graph* graph, size_t index, tern_value_info* info);
TERN_API tern_status tern_graph_output_info(const tern_graph* graph, size_t index, tern_value_info* info);
/* Runs the graph on every input (by name). Inputs are read in place, not copied: each buffer must hold its
 * elements row-major, aligned to its element size, unchanged until the call returns. Each output asked for
 * by name in outputs[i].name gets its dtype, rank and shape filled in; its values are copied into
 * outputs[i].data when that is not NULL and outputs[i].bytes is large enough (else
 * TERN_ERROR_BUFFER_TOO_SMALL, with .bytes set to the size needed), or, when data is NULL, .data points at
 * memory the graph owns until its next run (for an output that is an input passed through, the input's). */
TERN_API tern_status tern_graph_run(tern_graph* graph, const tern_tensor* inputs, size_t input_count, tern_tensor* outputs,
                                    size_t output_count);

/* Per-node profile of the runs since the load (or the last tern_graph_profile_clear) of a graph loaded with
 * tern_options_set_profiling: one record per node run, in order. Times in microseconds from the first
 * recorded node; flops and bytes are tern's cost model of the node (what the roofline in `tern profile`
 * uses). The array and its strings are valid until the next call on the graph. (API 1.1) */
typedef struct tern_node_profile {
  const char* node;    /* the node's name */
  const char* op_type; /* after tern's passes: fused nodes carry the fused op's type */
  const char* kernel;  /* the kernel that ran (its ISA tier or "opencl") */
  int64_t run;         /* which tern_graph_run, from 0 */
  double start_us, duration_us;
  double flops, bytes;
} tern_node_profile;
TERN_API tern_status tern_graph_profile(tern_graph* graph, const tern_node_profile** nodes, size_t* count);
TERN_API tern_status tern_graph_profile_clear(tern_graph* graph);
/* The profile as a Chrome trace (chrome://tracing, Perfetto), with ONNX Runtime's profiler fields. */
TERN_API tern_status tern_graph_write_profile(tern_graph* graph, const char* path);

/* ---- Models: a decoder folder (model.onnx, config.json, tokenizer) for text generation ----------------- */

typedef struct tern_model tern_model;

/* Loads a model folder (or its .onnx file, or a llama.cpp .gguf file: imported once into
 * $XDG_CACHE_HOME/tern/gguf/, else ~/.cache/tern/gguf/, as `tern generate --model FILE.gguf` does; a
 * TERN_MINIMAL build refuses it with TERN_ERROR_UNSUPPORTED; API 1.3) for generation over a ring-buffer KV cache (or, for a model whose
 * attention did not fuse into it — GPT-2's past_N —, the graph's own past fed back each step). `options` may be
 * NULL. *model is set unless out of memory; on failure it holds the message (tern_model_error). A folder
 * without a tokenizer loads: the functions that need one then fail with TERN_ERROR_UNSUPPORTED. */
TERN_API tern_status tern_model_load(const char* path, const tern_options* options, tern_model** model);
TERN_API void tern_model_free(tern_model* model);
/* A second sequence on `model`'s weights (loaded once, shared; freed with the last handle): *copy has the model's
 * tokenizer and options, an empty sequence of its own and greedy sampling. The two handles may be used on two
 * threads at once. On failure *copy holds the message, as a load's. (API 1.2) */
TERN_API tern_status tern_model_clone(const tern_model* model, tern_model** copy);
TERN_API const char* tern_model_error(const tern_model* model);

typedef struct tern_model_info {
  int64_t vocab_size;
  int64_t context_length; /* the model's (0 when it does not say) */
  int64_t window;         /* the KV ring's tokens */
  int64_t bos_token_id;   /* -1 when none */
  int64_t eos_token_id;   /* the first of the model's end tokens; -1 when none */
} tern_model_info;
TERN_API tern_status tern_model_get_info(const tern_model* model, tern_model_info* info);

/* Text → token ids into ids[0 … capacity): *count gets how many the text makes (when over capacity:
 * TERN_ERROR_BUFFER_TOO_SMALL and nothing written past capacity). add_bos: begin with the model's BOS. */
TERN_API tern_status tern_tokenize(tern_model* model, const char* text, int add_bos, int32_t* ids, size_t capacity, size_t* count);
/* Token ids → text, NUL-terminated, into text[0 … capacity): *length gets the bytes without the NUL (when
 * they do not fit: TERN_ERROR_BUFFER_TOO_SMALL). Bytes need not be whole UTF-8 characters at a cut. */
TERN_API tern_status tern_detokenize(tern_model* model, const int32_t* ids, size_t count, char* text, size_t capacity, size_t* length);

/* The id of the vocabulary entry spelled `piece` as the tokenizer spells it ("<0xE2>", "<|im_end|>"; a word
 * piece with its marker, "\u2581the" or "Ġthe"); TERN_ERROR_INVALID_ARGUMENT when none is. (API 2.0) */
TERN_API tern_status tern_token_id(tern_model* model, const char* piece, int32_t* id);

/* A conversation's token ids, as `tern chat` feeds them: the messages (roles "system", "user", "assistant")
 * in the model's chat template, ending with the assistant's turn opened; a model without a template gets
 * one running text. Capacity and *count as in tern_tokenize. (API 1.1) */
TERN_API tern_status tern_chat_tokenize(tern_model* model, const char* const* roles, const char* const* contents, size_t message_count,
                                        int32_t* ids, size_t capacity, size_t* count);
/* The same conversation as text in the model's chat template (its Jinja, run as transformers runs it; ending with
 * the assistant's turn opened; with the template's BOS marker, so tokenize it with add_bos 0);
 * TERN_ERROR_UNSUPPORTED for a model without a template (nor one of its family). Capacity and *length as in
 * tern_detokenize. (API 2.0) */
TERN_API tern_status tern_chat_format(tern_model* model, const char* const* roles, const char* const* contents, size_t message_count,
                                      char* text, size_t capacity, size_t* length);
/* The chat template run as transformers' apply_chat_template runs it: `messages_json` a JSON array of messages as
 * the template reads them (role, content, tool_calls, ...), `tools_json` a JSON array of tool schemas or NULL / "",
 * `template_source` a Jinja template of the caller's, or NULL / "" for the model's; with add_generation_prompt
 * non-zero the text ends with the assistant's turn opened. A template's error (its raise_exception too) is
 * TERN_ERROR_INVALID_ARGUMENT naming its line. Capacity and *length as in tern_detokenize. (API 2.3) */
TERN_API tern_status tern_chat_render(tern_model* model, const char* messages_json, const char* tools_json, const char* template_source,
                                      int add_generation_prompt, char* text, size_t capacity, size_t* length);

/* Text as tokens arrive: each push gives the new text the token completes (whole UTF-8 characters; may be
 * empty), flush what is held back at the end. `context` (may be NULL) is what came before, e.g. the prompt,
 * so that the first token's leading space is right. The stream uses its model's tokenizer: free it first.
 * *text is valid until the next call on the stream; failures leave their message on the model. (API 1.1) */
typedef struct tern_text_stream tern_text_stream;
TERN_API tern_status tern_text_stream_create(tern_model* model, const int32_t* context, size_t context_count, tern_text_stream** stream);
TERN_API void tern_text_stream_free(tern_text_stream* stream);
TERN_API tern_status tern_text_stream_push(tern_text_stream* stream, int32_t token, const char** text, size_t* length);
TERN_API tern_status tern_text_stream_flush(tern_text_stream* stream, const char** text, size_t* length);

/* Sampling: greedy when temperature is 0. tern_sampling_default fills the neutral settings (greedy, no
 * penalty); tern_model_sampling_default a model's own, which it starts with. */
typedef struct tern_sampling {
  float temperature;        /* 0: greedy */
  int32_t top_k;            /* 0: off */
  float top_p;              /* 1: off */
  float min_p;              /* 0: off */
  float repetition_penalty; /* 1: off */
  uint64_t seed;
} tern_sampling;
TERN_API void tern_sampling_default(tern_sampling* sampling);
/* The model's own sampling: its generation_config.json's do_sample, temperature, top_k, top_p and
 * repetition_penalty (greedy when it says nothing; seed 0) — what `tern generate`, `tern serve` and the Python
 * package use unless told otherwise, what a loaded or cloned model samples with until tern_model_set_sampling,
 * and what tern_generate uses when its params give no sampling. (API 2.0: tern_generate's NULL sampling and
 * a model's first sampling were greedy before.) */
TERN_API tern_status tern_model_sampling_default(const tern_model* model, tern_sampling* sampling);

/* The step API — one sequence per model, its cache held by the model:
 *   tern_model_prefill(m, prompt, n);               feed tokens (the prompt, or more later)
 *   while (tern_model_step(m, &token) == TERN_OK && token != eos) …   choose the next token and feed it
 * tern_model_reset empties the cache and the sequence. */
TERN_API tern_status tern_model_reset(tern_model* model);
/* Feeds `count` tokens after those the sequence holds; the logits of the last one are then current. */
TERN_API tern_status tern_model_prefill(tern_model* model, const int32_t* ids, size_t count);
/* Sampling for the following steps (and its random state, from the seed). Default: the model's own
 * (tern_model_sampling_default; greedy before API 2.0). */
TERN_API tern_status tern_model_set_sampling(tern_model* model, const tern_sampling* sampling);
/* The sequence keeps its first `length` tokens, as if the others had never been fed; there are no current
 * logits until more are fed. A ring cache whose window has not slid drops the rest in place; otherwise the
 * kept tokens are fed again. (API 2.0) */
TERN_API tern_status tern_model_rewind(tern_model* model, size_t length);
/* Replaces the current logits (vocab floats, copied) with the caller's: the next tern_model_sample or
 * tern_model_step chooses from them. (API 2.0) */
TERN_API tern_status tern_model_set_logits(tern_model* model, const float* logits, int64_t vocab);
/* Constrains the following tern_model_sample / tern_model_step to a JSON object: `schema_json` a JSON schema of
 * the subset tern serve's response_format takes (refused naming the keyword otherwise), "" any object, NULL
 * none. With max_tokens > 0 the object is whole within that many tokens chosen from now (when the vocabulary has
 * single-byte tokens). tern_model_constraint_done says when it is. (API 2.3) */
TERN_API tern_status tern_model_set_json_schema(tern_model* model, const char* schema_json, int64_t max_tokens);
/* Non-zero once a JSON constraint's object is whole. (API 2.3) */
TERN_API int tern_model_constraint_done(const tern_model* model);
/* Chooses the next token from the current logits (no feeding). */
TERN_API tern_status tern_model_sample(tern_model* model, int32_t* token);
/* One decode step: chooses the next token, feeds it, and returns it. */
TERN_API tern_status tern_model_step(tern_model* model, int32_t* token);
/* The current logits: *vocab floats, valid until the next call on the model. */
TERN_API tern_status tern_model_logits(tern_model* model, const float** logits, int64_t* vocab);
/* Non-zero when `token` is one of the model's end tokens (config.json / generation_config.json may list
 * several; tern_model_info gives the first). (API 1.1) */
TERN_API int tern_model_is_end_token(const tern_model* model, int32_t token);
/* The model's type as its config names it ("llama", "qwen2", …; "" when it does not), valid while the model
 * lives. (API 2.0) */
TERN_API const char* tern_model_type(const tern_model* model);
/* The model's padding token as its config names it; -1 when it does not. (API 2.0) */
TERN_API int64_t tern_model_pad_token_id(const tern_model* model);
/* Every end token of the model into ids[0 … capacity), *count how many; capacity as in tern_tokenize. (API 2.0) */
TERN_API tern_status tern_model_end_tokens(tern_model* model, int32_t* ids, size_t capacity, size_t* count);
/* Tokens the sequence holds (fed so far). */
TERN_API int64_t tern_model_position(const tern_model* model);

/* The whole job: resets the sequence, tokenizes `prompt` (with BOS), generates up to max_new_tokens with
 * `sampling` (NULL: the model's own, tern_model_sampling_default — greedy before API 2.0), and calls on_text
 * with each piece of new text as it is decoded (whole UTF-8 characters). It stops at an end token, at any of
 * the stop strings (the text up to the stop string is delivered, the stop string is not), or when on_text
 * returns non-zero. Afterwards the sequence holds the
 * prompt and the generated tokens but the last, whose choice the current logits made (as after
 * tern_model_sample): tern_model_prefill or tern_model_step can go on from there. */
typedef int (*tern_text_callback)(const char* text, size_t length, void* user_data);
typedef struct tern_generate_params {
  int64_t max_new_tokens; /* at least 1 (default 128) */
  const tern_sampling* sampling;
  const char* const* stop; /* stop strings, `stop_count` of them */
  size_t stop_count;
  int chat; /* non-zero: the prompt is one user turn in the model's chat template */
} tern_generate_params;
TERN_API void tern_generate_params_default(tern_generate_params* params);
/* Speculative decoding for this handle's tern_generate (API 2.5): each step checks a few proposed tokens in one run
 * over the weights. `speculation`: "ngram" or "ngram:N" — up to N tokens (1 to 16, default 3) that followed the
 * newest earlier occurrence of the last three (prompt lookup: text that quotes or edits its prompt) —; "draft" or
 * "draft:N" with `draft` a model of the same vocabulary (checked) on the ring cache — its greedy continuation (the
 * draft's weights are kept while this handle uses them: its handle may be freed) —; NULL or "off": none. Greedy
 * output is plain decoding's and sampling draws from the same distribution. Needs the ring cache; a generation
 * under a JSON constraint (tern_model_set_json_schema) runs without it. Not copied by tern_model_clone. */
TERN_API tern_status tern_model_set_speculation(tern_model* model, const char* speculation, tern_model* draft);
/* *generated (may be NULL) gets how many tokens were generated. */
TERN_API tern_status tern_generate(tern_model* model, const char* prompt, const tern_generate_params* params, tern_text_callback on_text,
                                   void* user_data, int64_t* generated);

/* Beam search (API 2.1), as Hugging Face's and onnxruntime-genai's (num_beams > 1): num_beams sequences searched
 * per prompt, one step at a time, on the model's sequence (a beam is a row of its ring cache, or of the graph's
 * own past) — the step API's sequence is emptied:
 *   tern_beam_search_start(m, prompts, lengths, count, &options);
 *   for (int done = 0; !done;) if (tern_beam_search_step(m, &done) != TERN_OK) break;
 *   tern_beam_search_sequence(m, i, &ids, &n);    prompt i / num_return_sequences's (i % num_return_sequences)-th best
 * A hypothesis scores its summed log-probabilities / its new tokens^length_penalty; a prompt is done when
 * num_beams hypotheses have ended in an end token and (early_stopping, or) no running beam can beat the worst.
 * The search ends when the step API feeds or resets the sequence (tern_model_prefill, tern_model_reset, …). */
typedef struct tern_beam_options {
  int32_t num_beams;            /* 1 … the vocabulary (default 4) */
  int32_t num_return_sequences; /* per prompt, 1 … num_beams (default 1) */
  float length_penalty;         /* default 1 */
  int early_stopping;           /* non-zero: done once num_beams hypotheses have ended (default 0, as Hugging Face) */
  int64_t max_new_tokens;       /* default 128 */
  int64_t min_new_tokens;       /* no end token among the first this many new tokens (default 0) */
} tern_beam_options;
TERN_API void tern_beam_options_default(tern_beam_options* options);
/* Starts a search from `count` prompts (prompts[i]: lengths[i] token ids, none empty); refuses a request as
 * tern_model_prefill refuses ids, and one whose cache at its last token would pass the memory cap. */
TERN_API tern_status tern_beam_search_start(tern_model* model, const int32_t* const* prompts, const size_t* lengths, size_t count,
                                            const tern_beam_options* options);
/* One token on every running beam (the first step feeds the prompts); *done (may be NULL) is non-zero once every
 * prompt is done or max_new_tokens steps have run. */
TERN_API tern_status tern_beam_search_step(tern_model* model, int* done);
/* Each beam's last token: num_beams per prompt in prompt order, the best running beam first (*count 0 before the
 * first step). Valid until the next call on the model. */
TERN_API tern_status tern_beam_search_tokens(tern_model* model, const int32_t** ids, size_t* count);
/* Sequence `index` (< prompts × num_return_sequences): the prompt then the generated tokens of its hypothesis —
 * final once done; before, the running beams compete as if they ended now. Valid until the next call on the model. */
TERN_API tern_status tern_beam_search_sequence(tern_model* model, size_t index, const int32_t** ids, size_t* count);

/* An OpenAI chat completion, as `tern serve` answers POST /v1/chat/completions: `request` is such a body (messages,
 * max_tokens, temperature, top_p, top_k, min_p, seed, stop, n, stream, stream_options, logprobs, top_logprobs,
 * response_format …), read and refused field by field as the server does, its prompt in the model's chat template,
 * its sampling over the model's own. Without "stream": *response gets the response object's JSON; with it,
 * on_chunk gets each chunk's JSON as the server's events carry them (returning non-zero stops generating) and
 * *response is empty. *response is valid until the next call on the model; the model's sequence is empty
 * afterwards. A model whose attention keeps the graph's own cache is refused (TERN_ERROR_UNSUPPORTED). (API 2.0) */
TERN_API tern_status tern_chat_completion(tern_model* model, const char* request, tern_text_callback on_chunk, void* user_data,
                                          const char** response, size_t* length);

#ifdef __cplusplus
}
#endif

#endif /* TERN_TERN_H */
