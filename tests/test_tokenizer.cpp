// tokenizer.json support against Hugging Face's own tokenizers (goldens from tools/ort/tokenizer_goldens.mjs,
// @huggingface/tokenizers) on the real tokenizer files in ../shared/models: GPT-2 byte-level BPE and
// Llama-2 SentencePiece-style BPE with byte fallback. Includes hand-checked anchors.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "llm/tokenizer.h"

using namespace tern::llm;
namespace fs = std::filesystem;

namespace {

void check_tokenizer(const char* model, const char* golden) {
  const fs::path dir = fs::path(TERN_SHARED_DIR) / "models" / "ort-genai" / model;
  if (!fs::exists(dir / "tokenizer.json")) {
    MESSAGE("skipped: ", (dir / "tokenizer.json").string(), " not found (shared data lives at ../shared)");
    return;
  }
  auto tok = load_tokenizer(dir.string());
  std::ifstream f(fs::path(TERN_SOURCE_DIR) / "tests" / "goldens" / golden);
  const nlohmann::json g = nlohmann::json::parse(f);
  for (const auto& c : g["cases"]) {
    const std::string text = c["text"];
    CAPTURE(text);
    CHECK(tok->encode(text, true) == c["ids"].get<std::vector<int64_t>>());
    CHECK(tok->encode(text, false) == c["ids_no_special"].get<std::vector<int64_t>>());
    const auto ids = c["ids"].get<std::vector<int64_t>>();
    CHECK(tok->decode(ids) == c["decoded"].get<std::string>());
    // Streaming: token-by-token pieces, reassembled on character boundaries, give the same text.
    TextStream stream(*tok);
    std::string streamed;
    for (int64_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    CHECK(streamed == c["decoded"].get<std::string>());
  }
}

}  // namespace

TEST_CASE("GPT-2 byte-level BPE tokenizer.json matches Hugging Face's tokenizers") {
  check_tokenizer("tiny-random-gpt2-fp32", "tokenizer-gpt2.json");
  const fs::path dir = fs::path(TERN_SHARED_DIR) / "models" / "ort-genai" / "tiny-random-gpt2-fp32";
  if (!fs::exists(dir)) return;
  auto tok = load_tokenizer(dir.string());
  CHECK(tok->encode("Hello world", true) == std::vector<int64_t>{15496, 995});  // GPT-2's well-known ids
}

TEST_CASE("Llama-2 SentencePiece-style tokenizer.json (byte fallback) matches Hugging Face's tokenizers") {
  check_tokenizer("tiny-random-LlamaForCausalLM-fp16", "tokenizer-llama2.json");
  const fs::path dir = fs::path(TERN_SHARED_DIR) / "models" / "ort-genai" / "tiny-random-LlamaForCausalLM-fp16";
  if (!fs::exists(dir)) return;
  auto tok = load_tokenizer(dir.string());
  CHECK(tok->encode("Hello world", true) == std::vector<int64_t>{1, 15043, 3186});  // <s> ▁Hello ▁world
  CHECK(tok->decode({1, 15043, 3186, 2}) == "Hello world");                         // control tokens vanish
}

TEST_CASE("tokenizers imported from GGUFs give llama.cpp's ids on 1,000 mixed lines: SmolLM2 (BPE), Gemma 3 (SentencePiece)") {
  // Goldens: tools/llama_cpp_token_ids.sh (llama-tokenize) on each GGUF; the folders: scripts/get-models.sh.
  for (const auto& [model, golden_file] :
       {std::pair{"smollm2-135m-instruct", "smollm2_llama_cpp_ids.txt"}, {"gemma-3-270m", "gemma3_llama_cpp_ids.txt"}}) {
    CAPTURE(model);
    const fs::path dir = fs::path(TERN_SOURCE_DIR) / "models" / model;
    if (!fs::exists(dir / "tokenizer.json")) {
      MESSAGE("skipped: ", dir.string(), " is absent (scripts/get-models.sh imports it)");
      continue;
    }
    auto tok = load_tokenizer(dir.string());
    const fs::path fixtures = fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "tokenizer";
    std::ifstream text(fixtures / "mixed_1000.txt"), golden(fixtures / golden_file);
    std::string line, ids_line;
    int lines = 0, same = 0;
    while (std::getline(text, line) && std::getline(golden, ids_line)) {
      std::vector<int64_t> want;
      std::istringstream in(ids_line);
      for (int64_t id; in >> id;) want.push_back(id);
      const auto got = tok->encode(line, false);
      CAPTURE(line);
      CHECK(got == want);
      ++lines;
      same += got == want;
      // And back: the ids decode to the line.
      CHECK(tok->decode(got) == line);
    }
    CHECK(lines == 1000);
    MESSAGE(std::string(model), ": ", same, " of ", lines, " lines tokenize as llama.cpp does");
  }
}

TEST_CASE("StopScanner: stop strings end the text before them, even split across tokens") {
  StopScanner s({"END", "\n\n"});
  CHECK(s.push("Hello E") == "Hello ");  // "E" may begin "END": held back
  CHECK(s.push("x") == "Ex");
  CHECK(s.push("EN") == "");
  CHECK(s.push("D and more") == "");
  CHECK(s.stopped());
  CHECK(s.flush() == "");
  StopScanner t({"\n\n"});
  CHECK(t.push("a\n") == "a");
  CHECK(t.flush() == "\n");  // the end: what was held goes out
  CHECK(!t.stopped());
}

TEST_CASE("byte_piece reads SentencePiece's <0xNN> pieces and nothing else") {
  CHECK(byte_piece("<0x0A>") == 10);
  CHECK(byte_piece("<0xff>") == 255);
  CHECK(byte_piece("<0xE2>") == 0xE2);
  for (const char* other : {"<0x1>", "<0x0A", "<0xG0>", "<0x0A>x", "<0X0A>", "abcdef", ""}) CHECK(byte_piece(other) == -1);
}

TEST_CASE("longest_token_bytes bounds the text a token covers, so a prompt too long for a context is known unencoded") {
  const fs::path dir = fs::temp_directory_path() / ("tern-longest-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u2581hello": 3},
    "merges": ["a b"]}, "added_tokens": [{"id": 4, "content": "<|im_start|>", "special": true}]})";
  CHECK(load_tokenizer(dir.string())->longest_token_bytes() == 12);  // "<|im_start|>"; "▁hello" is 8 bytes
  fs::remove_all(dir);
  // The bound on real text: the default model's tokenizer over 1,000 mixed lines (prose, code, CJK, emoji).
  auto tok = load_tokenizer(std::string(TERN_SOURCE_DIR) + "/models/default");
  const size_t longest = tok->longest_token_bytes();
  std::ifstream lines(std::string(TERN_SOURCE_DIR) + "/tests/fixtures/tokenizer/mixed_1000.txt");
  size_t checked = 0;
  for (std::string line; std::getline(lines, line); ++checked) {
    CAPTURE(line);
    CHECK(tok->encode(line, false).size() * longest >= line.size());
  }
  CHECK(checked >= 1000);
}
