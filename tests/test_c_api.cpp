// The C API's values against independent references: a graph run through tern_graph_run equals the
// example's numpy outputs; tern_generate equals the C++ Generator's tokens (the model's own sampling); two models generate at
// once on two threads. (tests/c_api/test_c_api.c checks the statuses from C.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>
#include "diagnostics/test_data.h"
#include "fixture_models.h"
#include "kernels/cpu/isa.h"
#include "llm/generator.h"
#include "llm/model_folder.h"
#include "llm/tokenizer.h"
#include "model_builder.h"
#include "tern/tern.h"

using namespace tern;

namespace {

const std::string kSource = TERN_SOURCE_DIR;
const std::string kExample = kSource + "/examples/tiny_llama_block";

tern_tensor c_tensor(const std::string& name, const Tensor& t) {
  tern_tensor c{};
  c.name = name.c_str();
  c.dtype = static_cast<tern_dtype>(static_cast<int>(t.dtype()));
  c.rank = static_cast<int32_t>(t.rank());
  for (int64_t i = 0; i < t.rank(); ++i) c.shape[i] = t.dim(i);
  c.data = t.raw();
  c.bytes = t.nbytes();
  return c;
}

std::string generate_text(tern_model* m, const char* prompt, int64_t tokens) {
  tern_generate_params p;
  tern_generate_params_default(&p);
  p.max_new_tokens = tokens;
  std::string text;
  auto append = [](const char* s, size_t n, void* user) {
    static_cast<std::string*>(user)->append(s, n);
    return 0;
  };
  REQUIRE(tern_generate(m, prompt, &p, append, &text, nullptr) == TERN_OK);
  return text;
}

}  // namespace

TEST_CASE("C API: tern_graph_run gives the example's numpy reference outputs, into its memory or the caller's") {
  tern_graph* g = nullptr;
  REQUIRE(tern_graph_load((kExample + "/model.onnx").c_str(), nullptr, &g) == TERN_OK);
  Session reader(kExample + "/model.onnx");  // (reads the TensorProtos by the graph's input names)
  const auto feeds = read_input_dir(reader, kExample + "/test_data_set_0");
  const auto expected = read_output_dir(kExample + "/test_data_set_0");
  std::vector<tern_tensor> inputs;
  for (const auto& [name, t] : feeds) inputs.push_back(c_tensor(name, t));
  REQUIRE(tern_graph_output_count(g) == expected.size());

  tern_tensor out{};
  out.name = tern_graph_output_name(g, 0);
  REQUIRE(tern_graph_run(g, inputs.data(), inputs.size(), &out, 1) == TERN_OK);
  const Tensor& want = expected[0];
  REQUIRE(out.rank == want.rank());
  Tensor got(static_cast<DType>(out.dtype), Shape(out.shape, out.shape + out.rank));
  REQUIRE(out.bytes == got.nbytes());
  std::memcpy(got.raw(), out.data, out.bytes);
  CHECK(compare_tensors(want, got).empty());

  // Caller's buffer: too small says the size; large enough gets the same values.
  std::vector<char> small(16), mine(want.nbytes());
  tern_tensor into{};
  into.name = out.name;
  into.data = small.data();
  into.bytes = small.size();
  CHECK(tern_graph_run(g, inputs.data(), inputs.size(), &into, 1) == TERN_ERROR_BUFFER_TOO_SMALL);
  CHECK(into.bytes == want.nbytes());
  into.data = mine.data();
  into.bytes = mine.size();
  REQUIRE(tern_graph_run(g, inputs.data(), inputs.size(), &into, 1) == TERN_OK);
  CHECK(std::memcmp(mine.data(), got.raw(), mine.size()) == 0);

  // An unknown output and a missing input are named.
  tern_tensor unknown{};
  unknown.name = "no_such_output";
  CHECK(tern_graph_run(g, inputs.data(), inputs.size(), &unknown, 1) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tern_graph_error(g)).find("no_such_output") != std::string::npos);
  CHECK(tern_graph_run(g, inputs.data(), 1, &out, 1) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tern_graph_error(g)).find(feeds[1].first) != std::string::npos);
  tern_graph_free(g);
}

TEST_CASE("C API: tern_generate gives the C++ Generator's tokens under the model's own sampling") {
  tern_options* o = tern_options_create();
  REQUIRE(tern_options_set_threads(o, 1) == TERN_OK);
  tern_model* m = nullptr;
  REQUIRE(tern_model_load(test::kDefaultModel.c_str(), o, &m) == TERN_OK);
  tern_options_free(o);
  const std::string text = generate_text(m, "In the beginning", 32);
  tern_model_free(m);

  const llm::ModelFiles files = llm::resolve_model(test::kDefaultModel);
  const llm::ModelConfig cfg = llm::read_model_config(files.dir);
  llm::DecoderOptions d;
  d.threads = 1;
  Session session(files.onnx, llm::decoder_session_options(d, cfg, true));
  llm::Generator gen(session, cfg);
  const auto tok = llm::load_tokenizer(files.dir);
  const auto prompt = tok->encode("In the beginning", true);
  llm::GenerateOptions opt;
  opt.max_new_tokens = 32;
  opt.eos_token_ids = cfg.eos_token_ids;
  // One default everywhere: generation_config.json's (models/default: do_sample, temperature 0.8, top_p 0.95),
  // as the CLI takes it with no sampling flags (llm::sampling_options).
  opt.sampling = llm::sampling_options({}, cfg);
  REQUIRE(!opt.sampling.greedy);
  const auto res = gen.generate({prompt}, opt);
  CHECK(text == tok->decode(res.tokens[0]).substr(tok->decode(prompt).size()));
}

TEST_CASE("C API: two models generate at once on two threads, each as it does alone") {
  tern_model *a = nullptr, *b = nullptr;
  tern_options* o = tern_options_create();
  REQUIRE(tern_options_set_threads(o, 1) == TERN_OK);
  REQUIRE(tern_model_load(test::kDefaultModel.c_str(), o, &a) == TERN_OK);
  REQUIRE(tern_model_load(test::kDefaultModel.c_str(), o, &b) == TERN_OK);
  tern_options_free(o);
  const std::string alone_a = generate_text(a, "And God said", 24), alone_b = generate_text(b, "The king", 24);
  std::string together_a, together_b;
  std::thread ta([&] { together_a = generate_text(a, "And God said", 24); });
  std::thread tb([&] { together_b = generate_text(b, "The king", 24); });
  ta.join();
  tb.join();
  CHECK(together_a == alone_a);
  CHECK(together_b == alone_b);
  tern_model_free(a);
  tern_model_free(b);
}

TEST_CASE("C API: each load runs at the ISA tier its options name, two tiers in one process") {
  // The baseline (sse42, avx2 or neon: every machine tern builds for has it) and this machine's highest, loaded one
  // after the other and both held: the second is not refused for differing from the first.
  std::vector<tern_graph*> graphs;
  for (kernels::Isa isa : {kernels::machine_isas().front(), kernels::machine_isas().back()}) {
    CAPTURE(kernels::isa_name(isa));
    tern_options* o = tern_options_create();
    REQUIRE(tern_options_set_isa(o, kernels::isa_name(isa)) == TERN_OK);
    tern_graph* g = nullptr;
    CHECK(tern_graph_load((kExample + "/model.onnx").c_str(), o, &g) == TERN_OK);
    graphs.push_back(g);
    tern_options_free(o);
  }
  for (tern_graph* g : graphs) tern_graph_free(g);
  tern_options* o = tern_options_create();
  CHECK(tern_options_set_isa(o, "avx9") == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tern_options_error(o)).find("ISA tier 'avx9'") != std::string::npos);
  tern_options_free(o);
}

// An onnx-community repository (the llama cells: Optimum's fp32 export as onnx/model.onnx, its q8 as
// onnx/model_quantized.onnx): tern_options_set_dtype picks the file, the default takes fp32 (no q4 here), and a
// dtype the repository lacks fails naming those it has.
TEST_CASE("C API: tern_options_set_dtype picks a repository's onnx/ variant") {
  test::TempDir repo;
  std::filesystem::create_directory(repo.path / "onnx");
  const std::filesystem::path cells = std::filesystem::path(kSource) / "tests" / "fixtures" / "exports";
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json"})
    std::filesystem::copy_file(cells / "llama-optimum" / f, repo.path / f);
  std::filesystem::copy_file(cells / "llama-optimum" / "model.onnx", repo.path / "onnx" / "model.onnx");
  std::filesystem::copy_file(cells / "llama-tjs-q8" / "model.onnx", repo.path / "onnx" / "model_quantized.onnx");
  auto text_of = [&](const char* dtype) {
    tern_options* o = tern_options_create();
    REQUIRE(tern_options_set_threads(o, 1) == TERN_OK);
    if (dtype) REQUIRE(tern_options_set_dtype(o, dtype) == TERN_OK);
    tern_model* m = nullptr;
    const tern_status s = tern_model_load(repo.path.string().c_str(), o, &m);
    tern_options_free(o);
    std::string text = s == TERN_OK ? generate_text(m, "Hi", 8) : std::string("error: ") + tern_model_error(m);
    tern_model_free(m);
    return text;
  };
  const std::string fp32 = text_of(nullptr), q8 = text_of("q8");
  CHECK(fp32 == text_of("fp32"));
  CHECK(q8.rfind("error", 0) != 0);
  CHECK(text_of("bnb4").find("has no bnb4 variant; it has fp32, q8") != std::string::npos);
}

// tern_options_set_kv_dtype reaches the ring: after 96 prompt tokens the last logits of a q8_0 and a q4_0 ring
// differ from the fp32 ring's (so the option took), q8_0's by less than q4_0's (the ring's own tests bound both
// against hand-made blocks and the float kernel); a name not a storage is refused naming the four.
TEST_CASE("C API: tern_options_set_kv_dtype stores the ring quantized") {
  auto logits_of = [](const char* kv_dtype) {
    tern_options* o = tern_options_create();
    REQUIRE(tern_options_set_threads(o, 1) == TERN_OK);
    REQUIRE(tern_options_set_kv_dtype(o, kv_dtype) == TERN_OK);
    tern_model* m = nullptr;
    REQUIRE(tern_model_load(test::kDefaultModel.c_str(), o, &m) == TERN_OK);
    tern_options_free(o);
    std::vector<int32_t> prompt(96);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1 + (i * 37) % 200);
    REQUIRE(tern_model_prefill(m, prompt.data(), prompt.size()) == TERN_OK);
    const float* logits = nullptr;
    int64_t vocab = 0;
    REQUIRE(tern_model_logits(m, &logits, &vocab) == TERN_OK);
    std::vector<float> out(logits, logits + vocab);
    tern_model_free(m);
    return out;
  };
  const std::vector<float> fp32 = logits_of("fp32"), q8 = logits_of("q8_0"), q4 = logits_of("q4_0");
  auto max_diff = [&](const std::vector<float>& a) {
    REQUIRE(a.size() == fp32.size());
    float d = 0;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - fp32[i]));
    return d;
  };
  const float d8 = max_diff(q8), d4 = max_diff(q4);
  CAPTURE(d8);
  CAPTURE(d4);
  CHECK(d8 > 0);
  CHECK(d8 < d4);
  CHECK(d4 < 1.0f);
  tern_options* o = tern_options_create();
  CHECK(tern_options_set_kv_dtype(o, "q5_1") == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tern_options_error(o)) == "kv_dtype 'q5_1' (fp32, fp16, q8_0, q4_0)");
  CHECK(tern_options_set_kv_dtype(o, nullptr) == TERN_ERROR_INVALID_ARGUMENT);
  tern_options_free(o);
}

// tern_model_set_speculation: prompt lookup and a draft model (models/default's int4 copy, its handle freed before it
// drafts) give plain greedy decoding's text, and leave the step API where a plain generation does — the same next
// step. Names and vocabularies that cannot work are refused naming them.
TEST_CASE("C API: tern_model_set_speculation keeps greedy text and the step API's state") {
  auto load = [](const char* weights) {
    tern_options* o = tern_options_create();
    REQUIRE(tern_options_set_threads(o, 1) == TERN_OK);
    REQUIRE(tern_options_set_weights(o, weights) == TERN_OK);
    tern_model* m = nullptr;
    REQUIRE(tern_model_load(test::kDefaultModel.c_str(), o, &m) == TERN_OK);
    tern_options_free(o);
    return m;
  };
  tern_sampling greedy;
  tern_sampling_default(&greedy);
  const char* prompt = "And God said, Let there be light: and there was light. And God said, Let there be";
  // The text of 40 greedy tokens, then the position and the token the next step chooses.
  auto run = [&](tern_model* m) {
    tern_generate_params p;
    tern_generate_params_default(&p);
    p.max_new_tokens = 40;
    p.sampling = &greedy;
    std::string text;
    auto append = [](const char* s, size_t n, void* user) {
      static_cast<std::string*>(user)->append(s, n);
      return 0;
    };
    int64_t generated = 0;
    REQUIRE(tern_generate(m, prompt, &p, append, &text, &generated) == TERN_OK);
    CHECK(generated == 40);
    int32_t next = -1;
    const int64_t position = tern_model_position(m);
    REQUIRE(tern_model_step(m, &next) == TERN_OK);
    return std::make_tuple(text, position, next);
  };
  tern_model* m = load("fp32");
  const auto plain = run(m);
  REQUIRE(tern_model_set_speculation(m, "ngram", nullptr) == TERN_OK);
  CHECK(run(m) == plain);
  tern_model* draft = load("int4");
  REQUIRE(tern_model_set_speculation(m, "draft:4", draft) == TERN_OK);
  tern_model_free(draft);  // (its weights stay while m drafts with them)
  CHECK(run(m) == plain);
  REQUIRE(tern_model_set_speculation(m, nullptr, nullptr) == TERN_OK);
  CHECK(run(m) == plain);

  CHECK(tern_model_set_speculation(m, "lookahead", nullptr) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tern_model_error(m)).find("'lookahead'") != std::string::npos);
  CHECK(tern_model_set_speculation(m, "draft", nullptr) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tern_model_error(m)).find("draft needs") != std::string::npos);
  tern_options* o = tern_options_create();
  tern_model* other = nullptr;  // a vocabulary of 256 tokens, not models/default's 1024
  REQUIRE(tern_model_load((test::exports_dir() / "llama-optimum").string().c_str(), o, &other) == TERN_OK);
  tern_options_free(o);
  CHECK(tern_model_set_speculation(m, "draft", other) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tern_model_error(m)).find("a draft must share the model's vocabulary") != std::string::npos);
  tern_model_free(other);
  tern_model_free(m);
}

TEST_CASE("C API: tern_chat_render runs a caller's template with tools; tern_model_set_json_schema constrains steps") {
  tern_options* o = tern_options_create();
  tern_model* m = nullptr;
  REQUIRE(tern_model_load(test::kDefaultModel.c_str(), o, &m) == TERN_OK);
  tern_options_free(o);
  char text[256];
  size_t length = 0;
  const char* messages = R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}])";
  const char* own = "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}{{ tools|length }}{{ add_generation_prompt }}";
  REQUIRE(tern_chat_render(m, messages, R"([{"type": "function"}])", own, 0, text, sizeof text, &length) == TERN_OK);
  CHECK(std::string(text, length) == "user:Hi;assistant:Hello;1False");
  // (models/default carries no template: without one of the caller's, unsupported; a template's own error names its line)
  CHECK(tern_chat_render(m, messages, nullptr, nullptr, 1, text, sizeof text, &length) == TERN_ERROR_UNSUPPORTED);
  CHECK(tern_chat_render(m, messages, "", "\n{{ raise_exception('no') }}", 1, text, sizeof text, &length) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tern_model_error(m)).find("chat template raised: no") != std::string::npos);
  CHECK(tern_chat_render(m, "{}", nullptr, own, 1, text, sizeof text, &length) == TERN_ERROR_INVALID_ARGUMENT);
  // A JSON object, whole, however the steps sample.
  CHECK(tern_model_set_json_schema(m, R"({"type": "object", "properties": {"n": {"minimum": 1}}})", 0) == TERN_ERROR_INVALID_ARGUMENT);
  REQUIRE(tern_model_set_json_schema(m, R"({"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]})", 40) ==
          TERN_OK);
  const std::vector<int32_t> prompt = {1};
  REQUIRE(tern_model_prefill(m, prompt.data(), prompt.size()) == TERN_OK);
  std::vector<int32_t> out;
  for (int i = 0; i < 40 && !tern_model_constraint_done(m); ++i) {
    int32_t t = 0;
    REQUIRE(tern_model_step(m, &t) == TERN_OK);
    out.push_back(t);
  }
  REQUIRE(tern_model_constraint_done(m));
  size_t n = 0;
  std::string decoded(4096, '\0');
  REQUIRE(tern_detokenize(m, out.data(), out.size(), decoded.data(), decoded.size(), &n) == TERN_OK);
  const auto obj = nlohmann::json::parse(decoded.substr(0, n));
  CHECK(obj.contains("word"));
  CHECK(out.size() <= 40);
  CHECK(tern_model_set_json_schema(m, nullptr, 0) == TERN_OK);  // off again
  tern_model_free(m);
}
