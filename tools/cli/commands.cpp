// Every command's flags: the one table the parser, `--help` and the shell completion read (flags.h).
// A flag several commands share is declared once below, in the group whose library options it sets.
#include "tools/cli/flags.h"

namespace tern::cli {

namespace {

using Flag = FlagSpec;
using List = std::vector<FlagSpec>;

List operator+(List a, const List& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const Flag kModel = {"model", Arg::Text, "PATH", "",
                     "a model folder, .onnx or .gguf file, or an onnx-community repository (or positionally)"};
const Flag kDtype = {"dtype", Arg::Text, "D", "",
                     "a repository's onnx/ variant: fp32 fp16 q8 int8 uint8 q4 q4f16 bnb4 (default: the first present of "
                     "q4, fp32, q8, int8, uint8, fp16, q4f16, bnb4)"};
const Flag kThreads = {"threads", Arg::Int, "N", "", "worker threads (default: every core)"};
const Flag kMaxMemory = {"max-memory", Arg::Text, "SIZE", "",
                         "cap on the memory tern owns (bytes, or 512M, 6G); refused naming the numbers"};

// What cli::decoder_options reads: how a decoder session is built.
const List kDecoder = {
    {"device", Arg::Text, "D", "cpu", "cpu, or opencl[:N] (tern devices lists them)"},
    {"weights", Arg::Text, "F", "fp32", "MatMul weights converted at load: fp32 (as stored), fp16, bf16, int8, int4"},
    {"activations", Arg::Text, "A", "auto", "block-quantized products: auto (int8 where the model's accuracy_level asks), int8, fp32"},
    {"kv-dtype", Arg::Text, "T", "fp32", "the ring KV cache's storage: fp32, fp16, q8_0 or q4_0 (blocks of 32, llama.cpp's)"},
    {"window", Arg::Int, "W", "",
     "the ring KV cache's window in tokens; 0: the graph's own cache (default: the model's context, at most 131072)"},
    {"sinks", Arg::Int, "S", "4", "attention sinks kept once the window slides"},
    kThreads,
    kMaxMemory,
    {"prefault", Arg::Switch, "", "", "map the weights into the process at load (no page faults in the first prompt)"},
    {"no-pack", Arg::Switch, "", "", "load without the folder's .tern-pack"},
};

// What cli::sampling_choices reads. Left out, the model's generation_config.json decides; when it is silent
// (no do_sample), generate is greedy and chat samples at temperature 0.7, top-p 0.9 (llm::sampling_options).
const List kSampling = {
    {"greedy", Arg::Switch, "", "", "always the most likely token"},
    {"temperature", Arg::Number, "T", "", "sampling temperature (default: generation_config.json's; else greedy, chat 0.7)"},
    {"top-k", Arg::Int, "K", "", "sample among the K most likely tokens; 0: all"},
    {"top-p", Arg::Number, "P", "", "sample within the smallest set of probability P (default: the config's; chat 0.9)"},
    {"min-p", Arg::Number, "P", "", "drop tokens less likely than P times the best one"},
    {"repetition-penalty", Arg::Number, "R", "", "divide the logits of tokens already in the text by R (>1)"},
    {"frequency-penalty", Arg::Number, "F", "", "a token's logit less F times its count in the text (OpenAI's; -2 to 2)"},
    {"presence-penalty", Arg::Number, "P", "", "a token's logit less P once it is in the text (OpenAI's; -2 to 2)"},
    {"seed", Arg::Int, "S", "0", "the sampler's seed"},
};

// Speculation (generate, chat and serve; llm/speculation.h): prompt lookup, or a draft model's (llm/draft_model.h).
const FlagSpec kSpeculate = {"speculate", Arg::Text, "ngram[:N]", "",
                             "propose up to N tokens (3) a step from earlier text, check them in one run"};
const FlagSpec kDraftModel = {"draft-model", Arg::Text, "DIR", "",
                              "a smaller model with the same vocabulary proposes the drafts (--speculate draft[:N])"};

// What cli::write_profile reads.
const List kProfileOutput = {
    {"top", Arg::Int, "N", "10", "the N slowest nodes"},
    {"trace", Arg::Text, "FILE.json", "", "a Chrome trace (Perfetto) with ONNX Runtime's event fields"},
    {"html", Arg::Text, "FILE.html", "", "a self-contained report: roofline, time by op type, per-layer timelines"},
    {"svg", Arg::Text, "FILE.svg", "", "the roofline chart alone"},
};

const CommandSpec::Positional kModelPositional = {"model", "MODEL", false};
const CommandSpec::Positional kModelRequired = {"model", "MODEL", true};

std::vector<CommandSpec> make_specs() {
  std::vector<CommandSpec> c;
  c.push_back({"generate",
               {kModelPositional},
               "Generates text from a model (default: tern's own models/default).",
               R"(MODEL is a model folder, an .onnx file, or a .gguf file (imported once into a cache folder). A Hugging
Face onnx-community / transformers.js repository (configs at its root, onnx/model*.onnx) runs the variant
--dtype names, said on stderr. Text streams to stdout; the last line on stderr gives prefill and decode
tokens/s. Sampling follows the flags, else the folder's generation_config.json (do_sample, temperature,
top_k, top_p, repetition_penalty), else greedy. --ids rows of unequal length are left-padded.
--chat wraps each prompt as a user turn in the model's chat template (as chat's --help says);
--stop ends a sequence when its new text contains TEXT. The KV cache is tern's ring buffer whenever the
model's attention allows: each layer's keys (before RoPE) in a window of W tokens (allocated as it fills)
with S attention sinks once it slides, so generation can run past the model's context with bounded
memory (beam search too: a beam is a ring row). --window 0 and --no-cache use the graph's own cache.
--weights converts the MatMul weights at load: fp16/bf16 halve the bytes a token streams, int8/int4
block-quantize them (block 32, asymmetric, as MatMulNBits) to a quarter / an eighth. --activations:
block-quantized products quantize their activations to int8 per block (integer dot products: faster,
slightly less exact) where the model's MatMulNBits ask for it (accuracy_level 4, as ONNX Runtime does;
GGUF imports do, as llama.cpp computes) — or always (int8), or never (fp32); in every row, a prompt's
too, but on AMX, whose prefill keeps fp32 activations (on bf16 tiles).
--max-memory caps the memory tern owns — weights repacked at load, KV cache, activations; mapped weight
files are the kernel's to page — and fails naming the numbers, instead of being killed for memory: before
repacking any weight when the load's predicted peak passes it, before the prefill when the KV cache at the
last new token and the activations' forecast would.
--prefault maps the weights read from the model's files into the process at load (MatMulNBits blocks; not
embedding tables), so the first prompt takes no page faults for them; a pack (tern pack) is read into
memory instead of served mapped: a longer load and owned memory for faster decoding (1B int4: +24%).
--speculate ngram[:N] (one prompt, on the ring cache) proposes up to N tokens (3) a step — those that followed
the newest earlier occurrence of the last few tokens (prompt lookup) — and checks them in one run: text that
quotes or edits its prompt comes several tokens per pass over the weights. Greedy tokens are plain decoding's;
sampled ones come from the same distribution (the rejection rule). --stats prints how many were accepted.
--draft-model DIR (a folder, .onnx or .gguf of a smaller model with the same vocabulary, run with the same
decoder flags) proposes instead the N tokens it would choose greedily (--speculate draft:N; 3 by default).
--top-logits N adds each step's N highest logits per sequence to the JSON ([[token, logit], ...] per
step), to tell a near-tie from a real difference where another runtime's greedy tokens part from tern's.
--device opencl runs every node the OpenCL device can take there (weights, activations and the ring KV
cache stay in device memory), the others on the CPU (bench and inspect --device list them).
)",
               List{kModel,
                    kDtype,
                    {"prompt", Arg::Text, "TEXT", "", "a prompt; repeat for a batch"},
                    {"prompt-file", Arg::Text, "F", "", "a prompt read from a file"},
                    {"ids", Arg::Text, "IDS", "", "token ids instead of text: \"1,2,3;4,5\" (rows ;-separated)"},
                    {"max-new-tokens", Arg::Int, "N", "128", "new tokens at most"},
                    {"min-new-tokens", Arg::Int, "N", "0", "no end token before N new tokens"},
                    {"num-beams", Arg::Int, "B", "1", "beam search with B beams"},
                    {"length-penalty", Arg::Number, "L", "1", "beam scores divided by length^L"},
                    {"early-stopping", Arg::Switch, "", "", "beam search ends when B hypotheses are done"},
                    {"chat", Arg::Switch, "", "", "wrap each prompt as a user turn in the model's chat format"},
                    {"system", Arg::Text, "TEXT", "", "a system turn before it (with --chat)"},
                    {"stop", Arg::Text, "TEXT", "", "end a sequence when its new text contains TEXT; repeatable"},
                    {"prefill-chunk", Arg::Int, "N", "", "feed the prompt N tokens per run; 0: whole (default: 512 on the ring cache)"},
                    {"no-cache", Arg::Switch, "", "", "the graph's own cache (as --window 0)"},
                    {"json", Arg::Switch, "", "", "the result as JSON (tokens, text, timings)"},
                    {"top-logits", Arg::Int, "N", "0", "with --json: each step's N highest logits"},
                    {"stats", Arg::Switch, "", "", "the bytes a decode step moves, and speculation's acceptance"},
                    kSpeculate,
                    kDraftModel} +
                   kSampling + kDecoder});
  c.push_back({"chat",
               {kModelPositional},
               "An interactive conversation in the model's chat format.",
               R"(The prompt is the model's own chat template (tokenizer_config.json's chat_template or chat_template.jinja,
run as transformers runs it, its default system prompt included); a folder without one gets its family's
published template (Gemma, Qwen, Phi-3), said on stderr, or none (a base model: one running text). Each
turn is prefilled on top of the KV cache the last one left (only the new turn is fed), the answer streams;
Ctrl-C stops an answer, Ctrl-D quits, /stats toggles the speed line, /reset forgets the conversation.
Tokens are sampled as generation_config.json says; when it is silent, at temperature 0.7 and top-p 0.9
(--greedy: the most likely token).
--tools FILE offers the tools of an OpenAI tools array (what tern serve's requests send) through the template;
when an answer calls them (<tool_call> blocks, or a whole {"name", "arguments"} object), each call's result is
asked for on its own line and the model answers with it. --tool-choice required (or a tool's name) makes each
turn's first answer a call, decoded under the tool's parameters schema so its arguments always parse.
)",
               List{kModel,
                    kDtype,
                    {"system", Arg::Text, "TEXT", "", "the system prompt"},
                    {"tools", Arg::Text, "FILE", "", "offer these tools (an OpenAI tools JSON array)"},
                    {"tool-choice", Arg::Text, "C", "auto", "auto, required, or a tool's name: each turn then begins with a call"},
                    {"max-new-tokens", Arg::Int, "N", "512", "new tokens at most per answer"},
                    {"stats", Arg::Switch, "", "", "print each answer's speed"},
                    kSpeculate,
                    kDraftModel} +
                   kSampling + kDecoder});
  c.push_back({"inspect",
               {kModelRequired},
               "Prints an ONNX model's opsets, inputs and outputs, op histogram and the ops tern cannot run.",
               R"(MODEL is an .onnx file or a model folder (its decoder); of a repository, first its onnx/ variants and
their sizes. --device runs a short greedy generation there and lists the nodes that stayed on the CPU.
--fusions loads the model as `generate --window W` would (W defaults to the model's context length, at
most 131072) and lists each rewrite the fusion passes made, node by node, or why none matched.
)",
               List{kModel, kDtype, {"fusions", Arg::Switch, "", "", "list the fusion passes' rewrites, or why none matched"}} + kDecoder});
  c.push_back({"bench",
               {kModelPositional},
               "Prefill and decode speed, the bandwidth a decode step reaches, load time and peak memory.",
               R"(Prefill and decode speed on a synthetic prompt (greedy, no early stop), the weight bytes a decode step
reads, the bandwidth that achieves against the machine's measured read bandwidth, load time and peak
memory. The KV cache is the one `generate` chooses; --window 0 for the graph's own. The read bandwidth is
probed before and after the run in a process forked before the model loads, so its 512 MB buffer is not
the run's peak RSS (its own peak is printed apart); --no-probe leaves it out, for a /usr/bin/time around
bench, which counts children too.
--machine measures the machine's peak fp32 GFLOP/s and read bandwidth and caches them
(~/.cache/tern/machine.json) for profile and bench-op's rooflines.
)",
               List{kModel,
                    kDtype,
                    {"machine", Arg::Switch, "", "", "measure the machine's peaks instead of a model"},
                    {"prompt-tokens", Arg::Int, "N", "128", "the synthetic prompt's length"},
                    {"new-tokens", Arg::Int, "N", "64", "decode steps"},
                    {"no-probe", Arg::Switch, "", "", "no bandwidth probe"},
                    {"json", Arg::Switch, "", "", "the results as JSON"}} +
                   kDecoder});
  c.push_back({"pack",
               {{"model", "MODEL_DIR", true}, {"out", "OUT_DIR", false}},
               "Prepares the model's weights once, as a load would, into <model>.tern-pack beside it.",
               R"(MatMul weights in the kernels' panel layout (or converted by --weights), the concatenations the fusions
make — written to <model>.tern-pack beside the model (with OUT_DIR: in a copy of the folder, its files
hard-linked where the file system allows, else copied). Later loads of that folder map the pack read-only
and run on it: nothing is repacked or copied, and its pages are the kernel's to share and evict. A pack
of int4 weights loads as int4 without --weights. A pack made from other model files (their bytes' XXH3
hash, checked whenever their sizes, times or inodes changed since packing) or by a build with another
kernel layout is refused with a message; --no-pack (generate, chat, bench, profile) loads without it.
)",
               List{kModel, {"out", Arg::Text, "DIR", "", "write the pack into a copy of the folder there"}} + kDecoder});
  c.push_back({"devices", {}, "Lists the OpenCL platforms and devices (opencl:N) with their memory, work-group size and fp16.", "", {}});
#ifndef TERN_MINIMAL  // (the commands of tools/cli/full/, which a minimal build leaves out)
  c.push_back({"run",
               {{"model", "MODEL.onnx", true}},
               "Runs a model on input_<i>.pb TensorProtos (the ONNX test layout) and writes output_<i>.pb.",
               R"(When the input folder also holds output_<i>.pb, compares with them and exits 4 on a mismatch.
--profile prints the run's per-op-type and per-node table (see profile).
)",
               List{kModel,
                    {"input-dir", Arg::Text, "DIR", "", "the folder of input_<i>.pb"},
                    {"output-dir", Arg::Text, "OUT", "", "write output_<i>.pb there"},
                    kThreads,
                    kMaxMemory,
                    {"profile", Arg::Switch, "", "", "print the run's per-op-type and per-node times"}} +
                   kProfileOutput});
  c.push_back({"eval",
               {kModelPositional},
               "Perplexity of a text under the model, computed by tern.",
               R"(Tokenized with the model's tokenizer (BOS first), cut into windows of N tokens, every next-token
prediction scored. --second-half scores as llama.cpp's llama-perplexity does: whole windows only, each
begun with BOS when the tokenizer adds one, the predictions of their second half. Every position is
computed as a generated token is: with int8 activations where decode has them (--activations auto and
accuracy_level 4, or int8), not the faster prefill's bf16 or fp32 tiles.
)",
               List{kModel,
                    kDtype,
                    {"text", Arg::Text, "FILE", "", "the text to score"},
                    {"context", Arg::Int, "N", "", "window length (default: the model's context, else 512)"},
                    {"second-half", Arg::Switch, "", "", "score as llama-perplexity does"},
                    {"weights", Arg::Text, "F", "fp32", "as generate's --weights"},
                    {"activations", Arg::Text, "A", "auto", "as generate's --activations"},
                    {"kv-dtype", Arg::Text, "T", "",
                     "score through the ring KV cache stored so (fp32, fp16, q8_0, q4_0), 4 positions a run, each reading "
                     "the ring as decode does (default: the graph's own cache, a window a run)"},
                    kThreads}});
  c.push_back({"profile",
               {kModelPositional},
               "Per op type and per node, for prefill and for decode: time, GFLOP, GB moved, roofline share.",
               R"(Calls, time, share, GFLOP and GB moved (from shapes and dtypes), arithmetic intensity, achieved GFLOP/s
and GB/s, and the share of this machine's roofline (bench --machine's peaks, measured on first use). The
profiler's own overhead is printed last.
--compare A.json B.json: per-op-type time deltas between two traces, tern's (--trace) or ONNX Runtime
profiles, instead of a model.
)",
               List{kModel,
                    kDtype,
                    {"compare", Arg::Text, "A.json B.json", "", "compare two traces instead", 2},
                    {"prompt-tokens", Arg::Int, "N", "128", "the synthetic prompt's length"},
                    {"new-tokens", Arg::Int, "N", "16", "decode steps (at least 2)"},
                    {"steps", Arg::Text, "S", "both", "prefill, decode or both"}} +
                   kProfileOutput + kDecoder});
  c.push_back({"bench-op",
               {{"op", "OP", true}},
               "One op alone at a shape, as a session runs it: median ms, GFLOP/s, GB/s, roofline %.",
               "",
               List{{"op", Arg::Text, "OP", "", "the op (listed below)"},
                    {"shape", Arg::Text, "D1,D2,...", "", "its dimensions (what each means: below)"},
                    {"dtype", Arg::Text, "T", "fp32", "fp32 or fp16"},
                    {"weights", Arg::Text, "F", "fp32", "the weights' format, as generate's --weights"},
                    {"activations", Arg::Text, "A", "auto", "as generate's --activations"},
                    {"kv-dtype", Arg::Text, "T", "fp32", "fp32, fp16, q8_0 or q4_0"},
                    {"bits", Arg::Int, "B", "4", "2, 4 or 8 (block-quantized ops)"},
                    {"block", Arg::Int, "B", "32", "the quantization block"},
                    kThreads,
                    {"device", Arg::Text, "D", "cpu", "cpu, or opencl[:N]"}}});
  c.push_back({"quantize",
               {kModelPositional},
               "Writes a model whose MatMul weights are com.microsoft MatMulNBits blocks (ONNX Runtime runs it too).",
               R"(Writes DIR/model.onnx (+ model.onnx_data): every MatMul with a constant float weight becomes MatMulNBits.
Asymmetric blocks (a scale and zero point each) unless --symmetric; scales rounded to float16 values.
--accuracy-level 4 lets decode quantize activations to int8 in tern and ONNX Runtime both (fastest,
+0.2-0.6% perplexity); 0 keeps them fp32. docs/quantize.md measures each setting. Other files (config,
tokenizer) are copied.
)",
               List{kModel,
                    {"out", Arg::Text, "DIR", "", "the folder to write"},
                    {"bits", Arg::Int, "B", "4", "4 or 8"},
                    {"block", Arg::Int, "N", "32", "weights per block"},
                    {"symmetric", Arg::Switch, "", "", "no zero points"},
                    {"accuracy-level", Arg::Int, "L", "4", "MatMulNBits' accuracy_level: 4 (int8 activations) or 0"}}});
  c.push_back({"convert",
               {{"format", "llama2c", true}, {"model", "MODEL.bin", true}},
               "Writes a llama2.c checkpoint as an ONNX model folder (Optimum layout, standard ops).",
               "",
               List{{"format", Arg::Text, "F", "", "the checkpoint's format: llama2c"},
                    kModel,
                    {"tokenizer", Arg::Text, "T.bin", "", "llama2.c's tokenizer file"},
                    {"out", Arg::Text, "DIR", "", "the folder to write"}}});
  c.push_back({"import-gguf",
               {{"model", "FILE.gguf", true}, {"out", "OUT_DIR", true}},
               "Writes a llama.cpp GGUF (llama, qwen2, qwen3, phi3, gemma2, gemma3) as an ONNX model folder.",
               R"(The same graph, the weights' exact values (every quantized type as MatMulNBits blocks, F16/BF16/F32 as
float32), sliding windows from the family and the metadata, config.json, tokenizer.json from the GGUF
vocabulary and the chat template. (generate, chat, bench, profile, eval and serve also take the .gguf
itself: imported once into $XDG_CACHE_HOME/tern/gguf/.)
)",
               List{kModel, {"out", Arg::Text, "DIR", "", "the folder to write"}}});
  c.push_back({"serve",
               {kModelRequired},
               "An OpenAI-compatible HTTP server over continuously batched generation.",
               R"(POST /v1/completions and /v1/chat/completions (the folder's chat template, as chat's --help says; a chat
request without temperature samples as chat does; "stream": true for server-sent events; logprobs;
response_format json_object or json_schema, by constrained decoding; tools and tool_choice: the template renders
the tools, and with "auto" an answer's calls are read from its text — <tool_call> blocks, or a Llama-3 {"name",
"parameters"} object — while "required" or a named function decodes the call under the function's parameters
schema, so its arguments always parse; a request with tools streams its answer whole, as one delta of content or of
tool_calls; frequency_penalty and presence_penalty as OpenAI's), POST
/v1/embeddings (with --embedding-model, or when MODEL itself is an encoder as sentence-transformers saves
one: modules.json, 1_Pooling — then embeddings alone; pooled and normalized as its config says; inputs
longer than its max_seq_length are refused, not truncated; or with --embeddings, the decoder's own: its
final norm's output at the last token (--pooling: or the mean, first or max over the tokens),
L2-normalized), GET /v1/models, /v1/models/ID, /health and /metrics (Prometheus). --api-key (or
$TERN_API_KEY) makes every request but /health need "Authorization: Bearer KEY" (401 otherwise).
Requests share one continuously batched run of --parallel sequences over the ring KV cache: a new prompt
is fed --prefill-chunk tokens per step while the others keep decoding. A finished row keeps its cache: a
prompt that begins with what one holds (a chat's system prompt and history) takes that row and feeds only
the rest. --speculate ngram[:N] lets each decoding row check up to N prompt-lookup drafts a step (as tern
generate's), --draft-model DIR a draft model's (a ring row for each --parallel row, the rows drafting batched in
its runs); /metrics counts them (tern_speculative_drafted_tokens_total, _accepted_tokens_total).
Limits, each refusal naming its flag and counted in /metrics (tern_refused_total): more than --queue
waiting sequences get 429 with Retry-After (each request has an HTTP thread: --parallel + --queue + 16,
so past them the 429 comes at once); a body over --max-body bytes 413; a prompt over --max-prompt-tokens
400 — refused before it is tokenized when its bytes could not fit; max_tokens over --max-tokens 400, and a
request without max_tokens stops there; with --max-memory, a request whose KV cache at its last token
would pass the cap 400 when a row frees for it. A request still running --timeout seconds after it came
ends (504, or an error event when streaming). --port 0 takes any free port; the address is printed on
stderr. SIGINT/SIGTERM stop it: new requests get 503, those running or queued get --grace seconds to
finish, then end (503); a second signal ends them at once.
)",
               List{kModel,
                    kDtype,
                    {"port", Arg::Int, "N", "8080", "the TCP port; 0: any free one"},
                    {"host", Arg::Text, "ADDR", "127.0.0.1", "the address to listen on (0.0.0.0: every address)"},
                    {"parallel", Arg::Int, "N", "4", "sequences decoded together"},
                    {"queue", Arg::Int, "N", "64", "waiting sequences before 429"},
                    {"prefill-chunk", Arg::Int, "N", "32", "prompt tokens fed per step beside the decoding rows"},
                    {"timeout", Arg::Number, "S", "600", "seconds a request may run"},
                    {"grace", Arg::Number, "S", "10", "seconds running requests get after SIGINT/SIGTERM"},
                    {"max-body", Arg::Int, "BYTES", "8388608", "request bodies at most"},
                    {"max-prompt-tokens", Arg::Int, "N", "", "prompts at most (default and at most: the context)"},
                    {"max-tokens", Arg::Int, "N", "", "max_tokens at most (default: what the context leaves)"},
                    {"no-prefix-cache", Arg::Switch, "", "", "feed every prompt whole"},
                    kSpeculate,
                    kDraftModel,
                    {"api-key", Arg::Text, "KEY", "", "require Authorization: Bearer KEY (default: $TERN_API_KEY)"},
                    {"cors-origin", Arg::Text, "ORIGINS", "", "let browser pages of these origins call it (comma-separated, or *)"},
                    {"model-name", Arg::Text, "NAME", "", "the model's id in /v1/models (default: the folder's name)"},
                    {"embedding-model", Arg::Text, "DIR", "", "a sentence-transformers encoder for /v1/embeddings"},
                    {"embeddings", Arg::Switch, "", "", "/v1/embeddings from the decoder's final norm"},
                    {"pooling", Arg::Text, "P", "last", "with --embeddings: last, mean, cls or max"}} +
                   kDecoder});
#endif
  return c;
}

}  // namespace

const std::vector<CommandSpec>& command_specs() {
  static const std::vector<CommandSpec> specs = make_specs();
  return specs;
}

}  // namespace tern::cli
