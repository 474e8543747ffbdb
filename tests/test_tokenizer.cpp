// tokenizer.json support against Hugging Face's own tokenizers (goldens from tools/ort/tokenizer_goldens.mjs,
// @huggingface/tokenizers) on the real tokenizer files in ../shared/models: GPT-2 byte-level BPE and
// Llama-2 SentencePiece-style BPE with byte fallback. Includes hand-checked anchors; llama2.c's tokenizer
// against run.c's own loop; long words (issue 51) and cancellation.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "llm/tokenizer.h"

using namespace tern::llm;
namespace fs = std::filesystem;

namespace {

void check_tokenizer_at(const fs::path& dir, const char* golden, const char* where) {
  if (!fs::exists(dir / "tokenizer.json")) {
    MESSAGE(("skipped: " + (dir / "tokenizer.json").string() + " not found (" + where + ")"));
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

void check_tokenizer(const char* model, const char* golden) {
  check_tokenizer_at(fs::path(TERN_SHARED_DIR) / "models" / "ort-genai" / model, golden, "shared data lives at ../shared");
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

TEST_CASE("WordPiece with BERT's normalizer and pre-tokenizer (all-MiniLM-L6-v2) matches Hugging Face's tokenizers") {
  // Accents stripped after NFD, CJK ideographs and Hangul (decomposed to jamo), controls and zero-width
  // characters removed, punctuation split, a 120-letter word as [UNK], literal [CLS]/[SEP] as added tokens.
  const fs::path dir = fs::path(TERN_SOURCE_DIR) / "models" / "all-minilm-l6-v2";
  check_tokenizer_at(dir, "tokenizer-minilm.json", "scripts/get-models.sh minilm fetches it");
  if (!fs::exists(dir / "tokenizer.json")) return;
  auto tok = load_tokenizer(dir.string());
  CHECK(tok->encode("Hello, world!", true) == std::vector<int64_t>{101, 7592, 1010, 2088, 999, 102});  // BERT's well-known ids
  CHECK(tok->decode({101, 7592, 1010, 2088, 999, 102}) == "hello, world!");
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

TEST_CASE("Gemma 3: a whole 86 KB text is one word, merged in 64 KB pieces, and gives llama.cpp's ids for the whole") {
  // Golden: llama-tokenize on the whole file (--no-bos), one line of ids (tools/llama_cpp_token_ids.sh --whole).
  const fs::path dir = fs::path(TERN_SOURCE_DIR) / "models" / "gemma-3-270m";
  if (!fs::exists(dir / "tokenizer.json")) {
    MESSAGE("skipped: ", dir.string(), " is absent (scripts/get-models.sh imports it)");
    return;
  }
  const fs::path fixtures = fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "tokenizer";
  std::ifstream text_file(fixtures / "mixed_1000.txt", std::ios::binary), golden(fixtures / "gemma3_llama_cpp_ids_whole.txt");
  const std::string text((std::istreambuf_iterator<char>(text_file)), {});
  REQUIRE(text.size() > 65536);  // (more than one piece)
  std::vector<int64_t> want;
  for (int64_t id; golden >> id;) want.push_back(id);
  const std::vector<int64_t> got = load_tokenizer(dir.string())->encode(text, false);
  CHECK(got.size() == want.size());
  CHECK(got == want);
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

namespace {

// llama2.c's run.c merge loop as it is written there — scan every adjacent pair, merge the best-scoring one
// (the first of equal scores), repeat: quadratic, the reference the heap-based encoder must equal.
std::vector<int64_t> run_c_encode(const std::string& tokenizer_bin, const std::string& text) {
  std::ifstream f(tokenizer_bin, std::ios::binary);
  int32_t max_len = 0;
  f.read(reinterpret_cast<char*>(&max_len), 4);
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::map<std::string, int64_t> lookup;
  for (float score; f.read(reinterpret_cast<char*>(&score), 4);) {
    int32_t len = 0;
    f.read(reinterpret_cast<char*>(&len), 4);
    std::string piece(static_cast<size_t>(len), '\0');
    f.read(piece.data(), len);
    lookup.emplace(piece, static_cast<int64_t>(pieces.size()));
    pieces.push_back(piece);
    scores.push_back(score);
  }
  std::vector<int64_t> t{lookup.at(" ")};
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;
    while (i + n < text.size() && n < 4 && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
    if (auto it = lookup.find(text.substr(i, n)); it != lookup.end()) t.push_back(it->second);
    else
      for (size_t k = 0; k < n; ++k) t.push_back(static_cast<unsigned char>(text[i + k]) + 3);
    i += n;
  }
  for (;;) {
    float best = -1e10f;
    int64_t best_id = -1;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < t.size(); ++i) {
      auto it = lookup.find(pieces[static_cast<size_t>(t[i])] + pieces[static_cast<size_t>(t[i + 1])]);
      if (it != lookup.end() && scores[static_cast<size_t>(it->second)] > best) {
        best = scores[static_cast<size_t>(it->second)];
        best_id = it->second;
        best_at = i;
      }
    }
    if (best_id < 0) break;
    t[best_at] = best_id;
    t.erase(t.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  return t;
}

// One unbroken word of `n` letters (a pre-tokenizer keeps it whole), the same every run.
std::string long_word(size_t n) {
  std::string w(n, 'a');
  uint32_t x = 12345;
  for (char& c : w) {
    x = x * 1664525u + 1013904223u;
    const uint32_t k = (x >> 16) % 52;
    c = static_cast<char>(k < 26 ? 'a' + k : 'A' + (k - 26));
  }
  return w;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("llama2.c tokenizer: the heap-based merge loop gives run.c's ids (1,000 mixed lines, a 2,000-letter word)") {
  const fs::path bin = fs::path(TERN_SHARED_DIR) / "models" / "stories260K" / "tok512.bin";
  if (!fs::exists(bin)) {
    MESSAGE("skipped: ", bin.string(), " not found (shared data lives at ../shared)");
    return;
  }
  auto tok = load_llama2c_tokenizer(bin.string(), 512);
  std::ifstream lines(fs::path(TERN_SOURCE_DIR) / "tests" / "fixtures" / "tokenizer" / "mixed_1000.txt");
  int checked = 0;
  for (std::string line; std::getline(lines, line); ++checked) {
    if (line.empty()) continue;
    CAPTURE(line);
    std::vector<int64_t> want = run_c_encode(bin.string(), line);
    want.insert(want.begin(), 1);  // BOS
    CHECK(tok->encode(line, true) == want);
  }
  CHECK(checked >= 1000);
  const std::string word = long_word(2000);
  CHECK(tok->encode(word, false) == run_c_encode(bin.string(), word));
}

TEST_CASE("a 100,000-character word tokenizes in well under a second (the merge loop is O(n log n), not quadratic)") {
  // The bound is generous (sanitizer builds, a busy machine): the quadratic loop took 15 s for 40,000 characters.
  const std::string word = long_word(100'000);
  std::vector<std::pair<std::string, std::unique_ptr<Tokenizer>>> toks;
  toks.emplace_back("models/default (BPE)", load_tokenizer(std::string(TERN_SOURCE_DIR) + "/models/default"));
  const fs::path shared = fs::path(TERN_SHARED_DIR) / "models";
  if (fs::exists(shared / "stories260K" / "tok512.bin"))
    toks.emplace_back("stories260K (llama2.c)", load_llama2c_tokenizer((shared / "stories260K" / "tok512.bin").string(), 512));
  if (fs::exists(shared / "ort-genai" / "tiny-random-gpt2-fp32" / "tokenizer.json"))
    toks.emplace_back("GPT-2 (byte-level BPE)", load_tokenizer((shared / "ort-genai" / "tiny-random-gpt2-fp32").string()));
  for (const char* model : {"smollm2-135m-instruct", "gemma-3-270m"})
    if (fs::exists(fs::path(TERN_SOURCE_DIR) / "models" / model / "tokenizer.json"))
      toks.emplace_back(model, load_tokenizer(std::string(TERN_SOURCE_DIR) + "/models/" + model));
  for (const auto& [name, tok] : toks) {
    CAPTURE(name);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int64_t> ids = tok->encode(word, false);
    const double s = seconds_since(t0);
    MESSAGE(name, ": 100,000 letters → ", ids.size(), " tokens in ", s, " s");
    CHECK(s < 10.0);
    CHECK(tok->decode(ids).find(word.substr(1000, 100)) != std::string::npos);
  }
}

TEST_CASE("encoding stops with EncodeCancelled when its cancel check says so, between words and inside a long one") {
  auto tok = load_tokenizer(std::string(TERN_SOURCE_DIR) + "/models/default");
  int asked = 0;
  const CancelCheck never = [&] { return ++asked, false; };
  const std::string word = long_word(100'000);
  CHECK(tok->encode(word, false, never) == tok->encode(word, false));
  CHECK(asked > 0);  // (asked inside the one word)
  CHECK_THROWS_AS(tok->encode(word, false, [] { return true; }), EncodeCancelled);
  std::string words;
  for (int i = 0; i < 2000; ++i) words += " and the";
  CHECK_THROWS_AS(tok->encode(words, false, [] { return true; }), EncodeCancelled);
  const fs::path bin = fs::path(TERN_SHARED_DIR) / "models" / "stories260K" / "tok512.bin";
  if (fs::exists(bin))
    CHECK_THROWS_AS(load_llama2c_tokenizer(bin.string(), 512)->encode(word, false, [] { return true; }), EncodeCancelled);
}
