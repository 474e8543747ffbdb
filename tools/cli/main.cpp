// The `tern` command line: one file per command in tools/cli/, each a thin layer over the library.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <sstream>
#include <vector>

#ifndef TERN_MINIMAL
#include "diagnostics/op_bench.h"
#endif
#include "kernels/cpu/isa.h"
#include "tern/tern.h"
#include "tools/cli/cli.h"

namespace {

const char* kUsage = R"(usage: tern <command> [options]     tern COMMAND --help: that command's part of this
       tern --version                   version, commit, compiler, ISA tiers built and run here
On a terminal, imports, quantization, packing, loads and eval draw a progress bar on stderr; --quiet
(any command) draws none.

commands:
  run MODEL.onnx --input-dir DIR [--output-dir OUT] [--threads N] [--profile [--trace F.json] [--html F.html]]
      Runs the model on input_<i>.pb TensorProtos (the ONNX test layout) and writes output_<i>.pb.
      When DIR also holds output_<i>.pb, compares with them and exits 4 on a mismatch.
      --profile prints the run's per-op-type and per-node table (see profile).
  inspect MODEL [--dtype D] [--fusions [--window W]] [--device opencl[:N]]
      Prints opsets, inputs/outputs with shapes, an op histogram and the ops tern cannot run, of an
      .onnx file or a model folder's decoder; of a repository, first its onnx/ variants and their sizes.
      --device runs a short greedy generation there and lists the nodes that stayed on the CPU.
      --fusions loads the model as `generate --window W` would (W defaults to the model's context
      length, at most 131072) and lists each rewrite the fusion passes made, node by node, or why
      none matched.
  generate [--model PATH [--dtype D]] [--prompt TEXT]... [--prompt-file F] [--ids "1,2,3;4,5"] [--max-new-tokens N]
           [--greedy | --temperature T --top-k K --top-p P --min-p P --seed S] [--repetition-penalty R]
           [--num-beams B [--length-penalty L] [--early-stopping]] [--min-new-tokens N]
           [--chat [--system TEXT]] [--stop TEXT]... [--window W [--sinks S] [--kv-dtype fp32|fp16]] [--prefill-chunk N]
           [--weights fp32|fp16|bf16|int8|int4] [--activations auto|fp32|int8] [--device cpu|opencl[:N]] [--threads N]
           [--no-cache] [--json [--top-logits N]] [--stats] [--max-memory SIZE] [--prefault]
      Generates text from a model folder (or .onnx file, or a .gguf file, imported once into a cache
      folder; default: tern's own models/default). A Hugging Face onnx-community / transformers.js
      repository (configs at its root, onnx/model*.onnx) runs the variant --dtype names (fp32, fp16, q8,
      int8, uint8, q4, q4f16, bnb4; also for chat, bench, eval, profile), by default the first present of
      q4, fp32, q8, int8, uint8, fp16, q4f16, bnb4, said on stderr. Text
      streams to stdout; the last line on stderr gives prefill and decode tokens/s. Sampling follows
      the flags, else the folder's generation_config.json (do_sample, temperature, top_k, top_p,
      repetition_penalty), else greedy. --ids rows of unequal length are left-padded.
      --chat wraps each prompt as a user turn in the model's chat format (Llama-3, ChatML, Llama-2,
      Phi-3); --stop ends a sequence when its new text contains TEXT. The KV cache is tern's ring
      buffer whenever the model's attention allows: each layer's keys (before RoPE) in a window of W
      tokens (default: the model's context length, at most 131072; allocated as it fills) with S attention sinks
      (default 4) once it slides, stored as fp32 or fp16 (--kv-dtype), so generation can run past the
      model's context with bounded memory (beam search too: a beam is a ring row). --window 0 and
      --no-cache use the graph's own cache. --min-new-tokens: no end token before N new tokens. --weights converts the MatMul weights at load: fp16/bf16 halve the bytes a token streams,
      int8/int4 block-quantize them (block 32, asymmetric, as MatMulNBits) to a quarter / an eighth.
      --activations: decode steps of block-quantized products quantize their activations to int8 per
      block (integer dot products: faster, slightly less exact) where the model's MatMulNBits ask for it
      (accuracy_level 4, as ONNX Runtime does; GGUF imports do, as llama.cpp computes) — or always
      (int8), or never (fp32). Prefill stays fp32.
      --max-memory SIZE (bytes, or 512M, 6G: powers of 1024) caps the memory tern owns — weights
      repacked at load, KV cache, activations; mapped weight files are the kernel's to page — and
      fails naming the numbers, instead of being killed for memory (also for chat, bench, profile):
      before repacking any weight when the load's predicted peak passes it, before the prefill when
      the KV cache at the last new token and the activations' forecast would (every run is also
      forecast from its inputs' shapes before its first node).
      --prefault maps the weights read from the model's files into the process at load (MatMulNBits
      blocks; not embedding tables), so the first prompt takes no page faults for them (bench:
      first_prefill_ms); a pack (tern pack) is read into memory instead of served mapped: a longer
      load and owned memory (counted by --max-memory) for faster decoding (1B int4: +24%).
      --stats adds the bytes a decode step moves for weights and for the KV cache. --top-logits N adds
      each step's N highest logits per sequence to the JSON ([[token, logit], ...] per step), to tell a
      near-tie from a real difference where another runtime's greedy tokens part from tern's.
      --device opencl runs every node the OpenCL device can take there (weights, activations and the
      ring KV cache stay in device memory; greedy decoding moves one token id each way per step, top-k
      sampling k scores and ids back), the others on the CPU (bench and inspect --device list them).
  bench --model PATH [--dtype D] [--prompt-tokens 128] [--new-tokens 64] [--threads N] [--window W] [--weights F]
        [--device cpu|opencl[:N]] [--max-memory SIZE] [--prefault] [--no-probe] [--json]
        (the KV cache as `generate` chooses it; --window 0 for the graph's own)
  bench --machine [--threads N]
      Prefill and decode speed on a synthetic prompt (greedy, no early stop), the weight bytes a decode
      step reads, the bandwidth that achieves against the machine's measured read bandwidth, load
      time and peak memory. The read bandwidth is probed before and after the run in a process forked
      before the model loads, so its 512 MB buffer is not the run's peak RSS (its own peak is printed
      apart); --no-probe leaves it out, for a /usr/bin/time around bench, which counts children too.
      --machine measures the machine's peak fp32 GFLOP/s and read bandwidth and
      caches them (~/.cache/tern/machine.json) for profile and bench-op's rooflines.
  profile --model PATH [--dtype D] [--prompt-tokens 128] [--new-tokens 16] [--steps prefill|decode|both] [--threads N]
          [--weights F] [--window W] [--top N] [--trace FILE.json] [--html FILE.html] [--svg FILE.svg]
      Per op type and per node (the N slowest, default 10), for prefill and for decode: calls, time,
      share, GFLOP and GB moved (from shapes and dtypes), arithmetic intensity, achieved GFLOP/s and
      GB/s, and the share of this machine's roofline (bench --machine's peaks, measured on first use).
      --trace writes a Chrome trace (Perfetto) with ONNX Runtime's event fields plus kernel and phase;
      --html a self-contained report (roofline chart, time by op type, per-layer timelines); --svg the
      roofline chart alone. The profiler's own overhead is printed last.
  profile --compare A.json B.json
      Per-op-type time deltas between two traces: tern's (--trace) or ONNX Runtime profiles.
  bench-op OP --shape D1,D2,... [--dtype fp32|fp16] [--weights F] [--kv-dtype fp32|fp16] [--threads N]
           [--bits 2|4|8] [--block B] [--device cpu|opencl[:N]]
      One op alone at a shape, as a session runs it: median ms, GFLOP/s, GB/s, roofline %. OPs:
)";
// (bench-op's list: op_bench_usage())
const char* kUsageTail =
    R"(  eval --model PATH [--dtype D] --text FILE [--context N] [--second-half] [--weights F] [--activations A] [--threads N]
      Perplexity of the text under the model, computed by tern: tokenized with the model's tokenizer
      (BOS first), cut into windows of N tokens (default: the model's context length), every
      next-token prediction scored. --second-half scores as llama.cpp's llama-perplexity does: whole
      windows only, each begun with BOS when the tokenizer adds one, the predictions of their second half.
      Every position is computed as a generated token is: with int8 activations where decode has them
      (--activations auto and accuracy_level 4, or int8), not the faster prefill's bf16 or fp32 tiles.
  quantize --model PATH --out DIR [--bits 4|8] [--block 32] [--symmetric] [--accuracy-level 4]
      Writes DIR/model.onnx (+ model.onnx_data): every MatMul with a constant float weight becomes
      com.microsoft MatMulNBits — ONNX Runtime runs it too. Asymmetric blocks (a scale and zero point
      each) unless --symmetric; scales rounded to float16 values. --accuracy-level 4 (the default) lets
      decode quantize activations to int8 in tern and ONNX Runtime both (fastest, +0.2-0.6% perplexity);
      0 keeps them fp32. docs/quantize.md measures each setting. Other files (config, tokenizer) are copied.
  convert llama2c MODEL.bin --tokenizer TOKENIZER.bin --out DIR
      Writes a llama2.c checkpoint as an ONNX model folder (Optimum layout, standard ops).
  chat MODEL_DIR [--dtype D] [--system TEXT] [--max-new-tokens N] [--greedy | sampling flags as generate] [--window W] [--stats]
      An interactive conversation in the model's chat format. Each turn is prefilled on top of the KV
      cache the last one left (only the new turn is fed), the answer streams; Ctrl-C stops an answer,
      Ctrl-D quits, /stats toggles the speed line, /reset forgets the conversation.
  import-gguf FILE.gguf OUT_DIR
      Writes a llama.cpp GGUF (llama, qwen2, qwen3, phi3, gemma2, gemma3) as an ONNX model folder: the same
      graph, the weights' exact values (every quantized type as MatMulNBits blocks, F16/BF16/F32 as float32),
      sliding windows from the family and the metadata, config.json, tokenizer.json from the GGUF vocabulary
      and the chat template. (generate, chat, bench, profile, eval and serve also take the .gguf itself:
      imported once into $XDG_CACHE_HOME/tern/gguf/.)
  pack MODEL_DIR [OUT_DIR] [--weights fp32|fp16|bf16|int8|int4]
      Prepares the model's weights once, as a load would — MatMul weights in the kernels' panel layout
      (or converted by --weights), the concatenations the fusions make — and writes them to
      <model>.tern-pack beside the model (with OUT_DIR: in a copy of the folder, its files hard-linked
      where the file system allows, else copied). Later loads of that folder map the pack read-only and
      run on it: nothing is repacked or copied, and its pages are the kernel's to share and evict. A pack
      of int4 weights loads as int4 without --weights. A pack made from other model files (their bytes'
      XXH3 hash, checked whenever their sizes, times or inodes changed since packing: a copied or
      touched folder pays one read of its files a load) or by a build with another kernel layout is
      refused with a message; --no-pack (generate, chat, bench, profile) loads without it.
  devices
      Lists the OpenCL platforms and devices (opencl:N) with their memory, work-group size and fp16.
  serve MODEL_DIR [--dtype D] [--port 8080] [--host 127.0.0.1] [--parallel 4] [--queue 64] [--prefill-chunk 32]
        [--timeout 600] [--grace 10] [--max-body 8388608] [--max-prompt-tokens N] [--max-tokens N]
        [--no-prefix-cache] [--api-key KEY] [--cors-origin ORIGINS] [--model-name NAME] [--window W]
        [--weights F] [--threads N] [--max-memory SIZE] [--embedding-model ENCODER_DIR]
        [--embeddings [--pooling last|mean|cls|max]]
      An OpenAI-compatible HTTP server: POST /v1/completions and /v1/chat/completions (the folder's chat
      template; "stream": true for server-sent events; logprobs; response_format json_object or
      json_schema, by constrained decoding), POST /v1/embeddings (with --embedding-model, or when MODEL_DIR itself is
      an encoder as sentence-transformers saves one: modules.json, 1_Pooling — then embeddings alone;
      pooled and normalized as its config says; inputs longer than its max_seq_length are refused, not
      truncated; or with --embeddings, the decoder's own: its final norm's output — the input of the
      vocabulary projection, Hugging Face's last_hidden_state — at the last token (--pooling: or the mean, first
      or max over the tokens), L2-normalized, inputs up to its context), GET /v1/models, /v1/models/ID, /health
      and /metrics (Prometheus). It listens on 127.0.0.1 unless --host says otherwise (0.0.0.0: every
      address). --api-key (or $TERN_API_KEY) makes every request but /health need "Authorization: Bearer
      KEY" (401 otherwise). --cors-origin lets browser pages of those origins call it (comma-separated, or
      *): preflights are answered and responses name the origin. Requests share one continuously batched run of --parallel sequences over the ring
      KV cache: a new prompt is fed --prefill-chunk tokens per step while the others keep decoding. A
      finished row keeps its cache: a prompt that begins with what one holds (a chat's system prompt and
      history) takes that row and feeds only the rest (--no-prefix-cache: every prompt whole).
      Limits, each refusal naming its flag and counted in /metrics (tern_refused_total): more than
      --queue waiting sequences get 429 with Retry-After (each request has an HTTP thread: --parallel +
      --queue + 16, so past them the 429 comes at once); a body over --max-body bytes 413; a prompt over
      --max-prompt-tokens (default and at most the context) 400 — refused before it is tokenized when
      its bytes could not fit; max_tokens over --max-tokens (default: what the context leaves) 400, and a
      request without max_tokens stops there; with --max-memory, a request whose KV cache at its last token
      would pass the cap 400 when a row frees for it (the rings grow for every row to the longest one's
      length: a smaller --window bounds them). A request still running --timeout seconds after it came —
      tokenizing, waiting, prefilling or decoding — ends (504, or an error event when streaming).
      --port 0 takes any free port; the address is printed on stderr. SIGINT/SIGTERM stop it: it stops
      listening, new requests get 503, those running or queued get --grace seconds to finish, then end
      (503); a second signal ends them at once.
)";

#ifdef TERN_MINIMAL
// The commands a TERN_MINIMAL build has (CMakeLists.txt leaves out the others' files).
const char* kMinimalNote = "this build (TERN_MINIMAL) has the commands generate, chat, inspect, pack, bench, devices\n\n";
std::string usage() { return std::string(kMinimalNote) + kUsage + "  (not in this build)\n" + kUsageTail; }
#else
std::string usage() { return std::string(kUsage) + tern::op_bench_usage() + kUsageTail; }
#endif

// `tern COMMAND --help`: the usage's entries for that command — each entry a line indented two spaces that
// begins with the command's name (bench and profile have two), with the lines indented deeper under it.
std::string command_usage(const std::string& cmd) {
  std::string out, line;
  std::istringstream in(usage());
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ')
      inside = line.compare(2, cmd.size(), cmd) == 0 && (line.size() == 2 + cmd.size() || line[2 + cmd.size()] == ' ');
    if (inside) out += line + "\n";
  }
  return out.empty() ? usage() : "usage: tern " + out.substr(2);
}

// `tern --version`: the library's build line (version, commit, compiler, the tier in use, OpenCL), then the
// ISA tiers this build has kernels for and those this CPU runs.
std::string version() {
  namespace k = tern::kernels;
  std::string runs;
  for (k::Isa isa : k::machine_isas()) runs += std::string(runs.empty() ? "" : " ") + k::isa_name(isa);
  return std::string(tern_build_info()) + "\nISA tiers built: " + k::isa_tier_names(" ") + "; this CPU runs: " + runs + "\n";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tern::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::cout << usage();
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "-V")) {
    try {
      std::cout << version();
    } catch (const std::exception& e) {  // (TERN_ISA naming a tier this CPU lacks)
      std::cerr << "tern: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  const std::string cmd = argv[1];
  // --quiet, anywhere after the command: no progress bars (cli.h). Taken off before the command parses.
  std::vector<char*> args(argv, argv + argc);
  if (const auto q = std::find_if(args.begin() + 2, args.end(), [](const char* a) { return !std::strcmp(a, "--quiet"); });
      q != args.end()) {
    args.erase(q);
    set_quiet(true);
    argc = static_cast<int>(args.size());
    argv = args.data();
  }
  for (int i = 2; i < argc; ++i)  // `tern generate --help` and the like: that command's entries of the usage
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::cout << command_usage(cmd);
      return 0;
    }
    // Every command, once; those of tools/cli/full/ are null in a minimal build (CMakeLists.txt leaves that folder out).
#ifdef TERN_MINIMAL
#define TERN_FULL_ONLY(command) nullptr
#else
#define TERN_FULL_ONLY(command) command
#endif
  const std::map<std::string, int (*)(int, char**)> commands = {
      {"generate", generate},
      {"chat", chat},
      {"inspect", inspect},
      {"pack", pack},
      {"bench", bench},
      {"devices", devices},
      {"run", TERN_FULL_ONLY(run)},
      {"eval", TERN_FULL_ONLY(eval)},
      {"profile", TERN_FULL_ONLY(profile)},
      {"quantize", TERN_FULL_ONLY(quantize)},
      {"convert", TERN_FULL_ONLY(convert)},
      {"import-gguf", TERN_FULL_ONLY(import_gguf)},
      {"bench-op", TERN_FULL_ONLY(bench_op)},
      {"serve", TERN_FULL_ONLY(serve)},
  };
  const auto it = commands.find(cmd);
  if (it == commands.end()) {
    std::cerr << "tern: unknown command '" << cmd << "'\n" << usage();
    return 2;
  }
  if (!it->second) {
    std::cerr << "tern: '" << cmd << "' is not in this build (TERN_MINIMAL); a full build has it\n";
    return 2;
  }
  try {
    return it->second(argc, argv);
  } catch (const tern::UnsupportedError& e) {
    std::cerr << "tern: " << e.what() << "\n";
    return 3;
  } catch (const std::bad_alloc&) {  // (what tern allocates is checked first: this is the system refusing)
    std::cerr << "tern: " << cmd
              << ": out of memory: an allocation failed (--max-memory makes tern refuse, naming what, "
                 "before the system does)\n";
    return 1;
  } catch (const std::length_error& e) {
    std::cerr << "tern: " << cmd << ": a size is larger than any allocation (" << e.what() << ")\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tern: " << e.what() << "\n";
    return 1;
  }
}
