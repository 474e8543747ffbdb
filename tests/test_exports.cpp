// The exporter matrix (tests/fixtures/exports, made by tools/exporters/make_exports.py): each
// architecture × exporter cell must give ONNX Runtime's greedy tokens for one prompt and a padded batch of
// two prompts of different lengths (right-padded where the graph keeps GroupQueryAttention's own cache, as it
// reads them: the genai cells at --window 0), on the graph's own cache and on tern's ring buffer, which must
// take over every cell;
// and the ring must slide past the model's context with its state bounded by the window.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixture_models.h"
#include "graph/onnx_loader.h"
#include "llm/generator.h"
#include "llm/model_folder.h"
#include "model_builder.h"

using namespace tern;
using namespace tern::llm;
using tern::test::exports_dir;
using tern::test::positions_from_cache_length;
namespace fs = std::filesystem;

namespace {

// Learned positions (GPT-2): the model has no position past its context, so the ring slides within it.
bool learned_positions(const std::string& cell) { return cell.rfind("gpt2-", 0) == 0; }

std::vector<fs::path> cells() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(exports_dir()))
    if (fs::exists(e.path() / "greedy.json")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json golden_of(const fs::path& cell) {
  std::ifstream f(cell / "greedy.json");
  return nlohmann::json::parse(f);
}

// A float16 graph's logits are float16 (steps of 2^-10 near 1): where ORT's best two are closer than this, float16
// rounding decides, and tern's ring — keys rotated in float32 as they are read, not stored rotated in float16 — may
// decide otherwise (llama-tjs-fp16: 1.5879 against 1.5869 at its 4th token). At 0.002 the five cells compare 3 to 64 steps.
constexpr double kTie = 0.002;
// And their prefill logits agree with ORT's to a few float16 steps (2^-9 for logits in [2, 4)).
constexpr double kFloat16Logits = 0.01;

// Greedy generation of every golden case on one session; tokens must equal ORT's (a float16 cell's up to its first
// near-tie, kTie) and the prefill's last-position logits agree within `tolerance`.
void check_cases(Session& s, const fs::path& cell, const nlohmann::json& golden, double tolerance, bool unpadded_only = false) {
  Generator gen(s, read_model_config(cell.string()));
  GenerateOptions o;
  o.max_new_tokens = golden["max_new_tokens"].get<int64_t>();
  o.eos_token_ids = golden["eos"].get<std::vector<int64_t>>();
  for (const auto& c : golden["cases"]) {
    const auto prompts = c["prompts"].get<std::vector<std::vector<int64_t>>>();
    if (unpadded_only && prompts.size() > 1 && prompts[0].size() != prompts[1].size()) continue;
    CAPTURE(prompts.size());
    gen.sequence().reset();
    const GenerateResult r = gen.generate(prompts, o);
    auto want = c["tokens"].get<std::vector<std::vector<int64_t>>>();
    if (c.contains("top2_gaps")) {  // float16 logits: compared up to the first step ORT itself decides by less than kTie
      const auto gaps = c["top2_gaps"].get<std::vector<double>>();
      const size_t steps = static_cast<size_t>(std::find_if(gaps.begin(), gaps.end(), [](double g) { return g < kTie; }) - gaps.begin());
      CAPTURE(steps);
      for (size_t b = 0; b < want.size(); ++b) {
        const size_t keep = std::min(want[b].size(), prompts[b].size() + steps);
        want[b].resize(keep);
        REQUIRE(r.tokens[b].size() >= keep);
      }
      std::vector<std::vector<int64_t>> got = r.tokens;
      for (size_t b = 0; b < got.size(); ++b) got[b].resize(want[b].size());
      CHECK(got == want);
    } else {
      CHECK(r.tokens == want);
    }
    const auto ort_logits = c["prefill_logits"].get<std::vector<std::vector<float>>>();
    REQUIRE(static_cast<int64_t>(ort_logits.size()) == r.prefill_logits.dim(0));
    double worst = 0;
    for (size_t b = 0; b < ort_logits.size(); ++b)
      for (size_t v = 0; v < ort_logits[b].size(); ++v)
        worst = std::max(worst, std::abs(double(r.prefill_logits.data<float>()[b * ort_logits[b].size() + v]) - ort_logits[b][v]));
    CHECK(worst <= (c.contains("top2_gaps") ? kFloat16Logits : tolerance));
  }
}

// Dynamically quantized cells (transformers.js's q8 files): DynamicQuantizeLinear takes one range over its whole
// input, so in a left-padded batch the padded positions' hidden states — what attention makes of a query row
// that every key is masked from — set every row's quantization; tern's and ONNX Runtime's differ there, and
// with them the batch's tokens (gpt_neox: its second row leaves ORT's after 13 tokens). Each prompt alone is
// compared; a batch of equal lengths would be too.
bool range_spans_batch(const nlohmann::json& golden) {
  const std::string e = golden["exporter"];
  return e == "tjs-q8" || e == "tjs-uint8" || e == "tjs-q8-merged";
}

// The arithmetic the goldens were made with: the genai int4 cells ask for int8 activations
// (accuracy_level 4), and their oracle ran ORT on a copy at accuracy_level 0 — fp32 activations.
SessionOptions oracle_options(const fs::path& cell) {
  SessionOptions so;
  if (golden_of(cell)["oracle"] == "accuracy_level 0") so.activations = ActivationFormat::Float32;
  return so;
}

// The genai builder's local layers from 0.18 keep a window buffer (GroupQueryAttention sliding_window_cache), which
// tern runs on its ring only: on the graph's own cache it refuses, naming the attribute.
bool ring_only(const Session& s) {
  return std::any_of(s.graph().nodes.begin(), s.graph().nodes.end(),
                     [](const Node& n) { return n.op_type == "GroupQueryAttention" && n.attr_int("sliding_window_cache", 0) != 0; });
}

}  // namespace

TEST_CASE("exporter matrix: every cell gives ONNX Runtime's greedy tokens on the graph's own cache") {
  for (const fs::path& cell : cells()) {
    CAPTURE(cell.filename().string());
    Session s((cell / "model.onnx").string(), oracle_options(cell));
    if (ring_only(s)) {
      CHECK_THROWS_WITH_AS(check_cases(s, cell, golden_of(cell), 1e-3), doctest::Contains("sliding_window_cache"), UnsupportedError);
      continue;
    }
    // Decomposed attention reads its cache as it lies (no repeat_kv or transpose copy per step).
    if (cell.filename().string().find("genai") == std::string::npos)
      CHECK(std::any_of(s.passes().fusions.begin(), s.passes().fusions.end(),
                        [](const Fusion& f) { return f.pattern.find("grouped product on the cache") != std::string::npos; }));
    // Every dynamically quantized product is one DynamicQuantizeMatMul (its weight packed once at load).
    CHECK(std::none_of(s.graph().nodes.begin(), s.graph().nodes.end(), [](const Node& n) { return n.op_type == "MatMulInteger"; }));
    check_cases(s, cell, golden_of(cell), 1e-3, range_spans_batch(golden_of(cell)));
  }
}

TEST_CASE("exporter matrix: the ring-buffer cache takes over every cell and gives ONNX Runtime's tokens") {
  for (const fs::path& cell : cells()) {
    const std::string name = cell.filename().string();
    CAPTURE(name);
    SessionOptions so = oracle_options(cell);
    so.decoder.ring_capacity = 256;
    so.decoder.ring_required = false;
    Session s((cell / "model.onnx").string(), so);
    std::string why;
    for (const auto& m : s.passes().misses) why += m.str() + "; ";
    CHECK_MESSAGE(s.passes().cached_layers > 0, why);
    if (s.passes().cached_layers > 0)
      check_cases(s, cell, golden_of(cell), 1e-3, positions_from_cache_length(name) || range_spans_batch(golden_of(cell)));
  }
}

// GroupQueryAttention's own cache reads a batch right-padded (DecoderIO::prompts_right_padded): beams over a batch of
// prompts of different lengths (each prompt's beams batch rows, reordered each step) give what each prompt's beams
// give alone, as greedy rows do in the test above.
TEST_CASE("exporter matrix: beams over a ragged batch on GroupQueryAttention's own cache equal each prompt's alone") {
  const fs::path cell = exports_dir() / "llama-genai-fp32";
  Session s((cell / "model.onnx").string(), oracle_options(cell));
  REQUIRE(s.passes().cached_layers == 0);
  Generator gen(s, read_model_config(cell.string()));
  GenerateOptions o;
  o.max_new_tokens = 6;
  o.num_beams = 2;
  const std::vector<std::vector<int64_t>> prompts{{1, 17, 200, 34, 99, 5, 61, 130}, {1, 42, 7, 250, 88}};
  const GenerateResult both = gen.generate(prompts, o);
  for (size_t b = 0; b < prompts.size(); ++b) {
    CAPTURE(b);
    CHECK(gen.generate({prompts[b]}, o).tokens[0] == both.tokens[b]);
  }
}

// The genai int4 cells as exported ask for int8 activations (accuracy_level 4), which ONNX Runtime quantizes per
// block in every row, the prompt's too: so does a tern session by default, but at tier amx (its prefill's bf16
// tiles; every_row_as_decode there). Their goldens were run on the file as it is; on the graph's own cache and on
// the ring.
TEST_CASE("exporter matrix: genai int4 cells at accuracy level 4 give ONNX Runtime's tokens") {
  int checked = 0;
  for (const fs::path& cell : cells()) {
    const nlohmann::json golden = golden_of(cell);
    if (!golden.contains("accuracy_level_4")) continue;
    ++checked;
    for (int64_t window : {0, 256}) {
      CAPTURE(cell.filename().string());
      CAPTURE(window);
      SessionOptions so;
      so.every_row_as_decode = kernels::default_isa() == kernels::Isa::Amx;
      so.decoder.ring_capacity = window;
      Session s((cell / "model.onnx").string(), so);
      if (ring_only(s)) continue;  // (at window 0: the graph-cache test checks the refusal)
      nlohmann::json as_exported = golden;
      as_exported["cases"] = golden["accuracy_level_4"];
      check_cases(s, cell, as_exported, 1e-3);
    }
  }
  CHECK(checked > 0);
}

TEST_CASE(
    "exporter matrix: the ring slides past the model's context (by 2 windows; GPT-2 to its last position) with its state "
    "bounded by the window") {
  for (const fs::path& cell : cells()) {
    const std::string name = cell.filename().string();
    CAPTURE(name);
    const ModelConfig cfg = read_model_config(cell.string());
    REQUIRE(cfg.context_length > 0);
    SessionOptions so;
    so.decoder.ring_capacity = 32;
    so.decoder.kv_sinks = 4;
    Session s((cell / "model.onnx").string(), so);
    Generator gen(s, cfg);
    const auto prompt = golden_of(cell)["cases"][0]["prompts"][0].get<std::vector<int64_t>>();
    GenerateOptions o;
    o.max_new_tokens = 40;  // the 32-token window is full
    gen.generate({prompt}, o);
    const int64_t full = gen.sequence().bytes_per_token();
    gen.sequence().reset();
    o.max_new_tokens =
        learned_positions(name)
            ? cfg.context_length - static_cast<int64_t>(prompt.size())
            : cfg.context_length +
                  2 * so.decoder
                          .ring_capacity;  // no eos: the whole length (3x the context was 768 tokens a cell: CI time under ASan and qemu)
    const GenerateResult r = gen.generate({prompt}, o);
    CHECK(static_cast<int64_t>(r.tokens[0].size()) == static_cast<int64_t>(prompt.size()) + o.max_new_tokens);
    CHECK(full > 0);
    CHECK(gen.sequence().bytes_per_token() == full);  // flat: the same window, however long the sequence
  }
}

// A genai export whose cache inputs and outputs name their head count and size ("kv_heads", "kv_cache_dim")
// instead of fixing them: the graph-cache path reads them off the present outputs as the shape rules compute them
// from the projections, and gives ORT's tokens (it refused the model: "has no fixed head count and size"); so does
// the ring.
TEST_CASE("a cache input with a symbolic head count and size runs on the graph's cache") {
  const fs::path cell = exports_dir() / "llama-genai-fp32";
  onnx::ModelProto mp;
  read_model_proto((cell / "model.onnx").string(), mp);
  int renamed = 0;
  auto symbolic_heads = [&](onnx::ValueInfoProto& v, const char* prefix) {
    if (v.name().rfind(prefix, 0) != 0) return;
    auto* dims = v.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim();
    (*dims)[1].set_dim_param("kv_heads");
    (*dims)[3].set_dim_param("kv_cache_dim");
    ++renamed;
  };
  for (auto& in : *mp.mutable_graph()->mutable_input()) symbolic_heads(in, "past_key_values.");
  for (auto& out : *mp.mutable_graph()->mutable_output()) symbolic_heads(out, "present.");
  REQUIRE(renamed == 8);
  test::TempDir tmp;
  const fs::path& dir = tmp.path;
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "genai_config.json"})
    if (fs::exists(cell / f)) fs::copy_file(cell / f, dir / f, fs::copy_options::overwrite_existing);
  {
    std::ofstream out(dir / "model.onnx", std::ios::binary);
    REQUIRE(mp.SerializeToOstream(&out));
  }
  Session s((dir / "model.onnx").string(), oracle_options(cell));
  check_cases(s, cell, golden_of(cell), 1e-3);
  SessionOptions ring = oracle_options(cell);
  ring.decoder.ring_capacity = 256;
  Session r((dir / "model.onnx").string(), ring);
  CHECK(r.passes().cached_layers == 2);
  check_cases(r, cell, golden_of(cell), 1e-3);
}

TEST_CASE("exporter matrix: a run's activation forecast is what the pool then takes, where it leaves no value out") {
  // Every cell, as tern generate loads it (the ring) and on the graph's own cache: a prefill of 2 rows of 9, then a
  // step of 1 after 9 (the graph's cache: past inputs of 9). The ring's are exact in every cell; a graph's own cache
  // reads some lengths from data (GroupQueryAttention's seqlens, a mask sliced by a computed end), left out.
  int exact = 0, estimates = 0;
  for (const fs::path& cell : cells()) {
    for (const bool ring : {true, false}) {
      const std::string name = cell.filename().string();
      CAPTURE(name);
      CAPTURE(ring);
      SessionOptions so = oracle_options(cell);
      so.decoder.ring_capacity = ring ? 256 : 0;
      so.decoder.ring_required = false;
      Session s((cell / "model.onnx").string(), so);
      if (ring_only(s)) continue;
      for (auto [batch, seq, past] : {std::tuple{2, 9, 0}, {1, 1, 9}}) {
        const auto feeds = test::decoder_feeds(s, batch, seq, s.stateful() ? 0 : past);
        const ActivationForecast::Result f = s.forecast_activations({test::shapes_of(feeds)});
        const size_t before = s.pool().held_bytes();
        if (s.stateful()) s.sequence().reset();
        s.run(feeds);
        const size_t grew = s.pool().held_bytes() - before;
        if (s.stateful()) CHECK(f.uncounted == 0);  // (the ring's graphs: every value sized by the inputs' dims)
        if (f.uncounted == 0) {
          CHECK(grew == f.pool_growth);
          ++exact;
        } else {
          ++estimates;
        }
      }
    }
  }
  MESSAGE(exact, " runs forecast to the byte, ", estimates, " leaving out values no input dim sizes (the graph's own cache)");
}

// An onnx-community / transformers.js repository made of the llama cells: configs and tokenizer at the root, the
// Optimum export as onnx/model.onnx (fp32) and its dynamic 8-bit quantization as onnx/model_quantized.onnx (q8) — or,
// as older repositories hold them, the merged decoders onnx/decoder_model_merged{,_quantized}.onnx. Each dtype runs its
// own file with every layer on the ring and gives that cell's ORT tokens.
TEST_CASE("a repository's onnx/ variants run by dtype, configs from its root") {
  for (const bool merged : {false, true}) {
    CAPTURE(merged);
    test::TempDir repo;
    fs::create_directory(repo.path / "onnx");
    for (const char* f : {"config.json", "generation_config.json", "tokenizer.json"})
      fs::copy_file(exports_dir() / "llama-optimum" / f, repo.path / f);
    const std::string fp32 = merged ? "llama-merged" : "llama-optimum", q8 = merged ? "llama-tjs-q8-merged" : "llama-tjs-q8";
    const std::string stem = merged ? "decoder_model_merged" : "model";
    fs::copy_file(exports_dir() / fp32 / "model.onnx", repo.path / "onnx" / (stem + ".onnx"));
    fs::copy_file(exports_dir() / q8 / "model.onnx", repo.path / "onnx" / (stem + "_quantized.onnx"));
    for (const auto& [dtype, cell] : {std::pair{"q8", q8}, std::pair{"fp32", fp32}}) {
      CAPTURE(dtype);
      const ModelFiles files = resolve_model(repo.path.string(), dtype);
      CHECK(files.dtype == dtype);
      const ModelConfig cfg = read_model_config(files.dir);
      CHECK(cfg.eos_token_ids == std::vector<int64_t>{2});
      SessionOptions so;
      so.decoder.ring_capacity = 256;
      Session s(files.onnx, so);
      CHECK(s.passes().cached_layers == 2);
      Generator gen(s, cfg);
      const nlohmann::json golden = golden_of(exports_dir() / cell);
      GenerateOptions o;
      o.max_new_tokens = golden["max_new_tokens"].get<int64_t>();
      o.eos_token_ids = cfg.eos_token_ids;
      const auto& c = golden["cases"][0];
      CHECK(gen.generate(c["prompts"].get<std::vector<std::vector<int64_t>>>(), o).tokens ==
            c["tokens"].get<std::vector<std::vector<int64_t>>>());
    }
    CHECK(resolve_model(repo.path.string()).dtype == "fp32");  // no q4 here: the exact file before the 8-bit one
  }
}

// Optimum's ORTModelForCausalLM runs a merged decoder's first step on the branch without past: use_cache_branch false
// beside a dummy past of length 1 (zeros) that branch never reads, and an attention_mask over the prompt alone. The
// inlined with-past branch takes that past as empty (Session::run): ORT's prefill logits, then its next token from the
// presents fed back with use_cache_branch true.
TEST_CASE("a merged decoder fed as Optimum feeds it: a dummy past beside use_cache_branch false") {
  const fs::path cell = exports_dir() / "llama-merged";
  Session s((cell / "model.onnx").string());
  CHECK(s.passes().merged.flag == "use_cache_branch");
  CHECK(s.passes().merged.past.size() == 4);
  const nlohmann::json golden = golden_of(cell);
  const auto& c = golden["cases"][0];
  const auto prompt = c["prompts"][0].get<std::vector<int64_t>>();
  const int64_t S = static_cast<int64_t>(prompt.size());
  std::vector<int64_t> positions(static_cast<size_t>(S));
  for (int64_t i = 0; i < S; ++i) positions[static_cast<size_t>(i)] = i;
  std::vector<std::pair<std::string, Tensor>> feeds = {
      {"input_ids", Tensor::from_vector<int64_t>(prompt, {1, S})},
      {"attention_mask", Tensor::from_vector<int64_t>(std::vector<int64_t>(static_cast<size_t>(S), 1), {1, S})},
      {"position_ids", Tensor::from_vector<int64_t>(positions, {1, S})},
      {"use_cache_branch", Tensor::from_vector<bool>({false}, {1})}};
  for (int l = 0; l < 2; ++l)
    for (const char* kv : {"key", "value"}) {
      Tensor dummy(DType::Float32, {1, 1, 1, 16});
      std::fill_n(dummy.data<float>(), 16, 0.0f);
      feeds.push_back({"past_key_values." + std::to_string(l) + "." + kv, dummy});
    }
  const Outputs out = s.run(feeds);
  const Tensor& logits = out.items[0].second;
  REQUIRE(logits.has_shape({1, S, 256}));
  const auto want = c["prefill_logits"][0].get<std::vector<float>>();
  double worst = 0;
  int64_t best = 0;
  for (int64_t v = 0; v < 256; ++v) {
    const float got = logits.data<float>()[(S - 1) * 256 + v];
    worst = std::max(worst, std::abs(double(got) - want[static_cast<size_t>(v)]));
    if (got > logits.data<float>()[(S - 1) * 256 + best]) best = v;
  }
  CHECK(worst <= 1e-3);
  const int64_t next = c["tokens"][0][static_cast<size_t>(S)].get<int64_t>();
  CHECK(best == next);
  // The next step: the presents as past, the flag true.
  std::vector<std::pair<std::string, Tensor>> step = {
      {"input_ids", Tensor::from_vector<int64_t>({next}, {1, 1})},
      {"attention_mask", Tensor::from_vector<int64_t>(std::vector<int64_t>(static_cast<size_t>(S + 1), 1), {1, S + 1})},
      {"position_ids", Tensor::from_vector<int64_t>({S}, {1, 1})},
      {"use_cache_branch", Tensor::from_vector<bool>({true}, {1})}};
  for (size_t i = 1; i < out.items.size(); ++i) {
    std::string name = out.items[i].first;
    name.replace(0, std::string("present").size(), "past_key_values");
    step.push_back({name, out.items[i].second});
  }
  const Outputs stepped = s.run(step);
  const Tensor& after = stepped.items[0].second;
  int64_t argmax = 0;
  for (int64_t v = 1; v < 256; ++v)
    if (after.data<float>()[v] > after.data<float>()[argmax]) argmax = v;
  CHECK(argmax == c["tokens"][0][static_cast<size_t>(S + 1)].get<int64_t>());
}
