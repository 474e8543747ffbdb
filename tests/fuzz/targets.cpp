#include "fuzz/targets.h"

#include <unistd.h>

#include <onnx/onnx_pb.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "convert/gguf.h"
#include "convert/gguf_import.h"
#include "convert/llama2c.h"
#include "core/json.h"
#include "graph/onnx_loader.h"
#include "llm/chat_template.h"
#include "llm/json_constraint.h"
#include "llm/model_config.h"
#include "llm/openai_api.h"
#include "llm/tokenizer.h"
#include "runtime/session.h"

namespace tern::fuzz {
namespace fs = std::filesystem;
namespace {

// A folder of this process's own (fuzzers run several processes at once), removed at exit:
//   model/      the folder a fuzzed model.onnx loads from: weights.bin (4 KiB, values 0..255 repeating) and
//               link.bin, a symlink to outside/secret.bin, so external-data escapes have something to reach
//   outside/    what must never be read
//   work/       files the other targets write
struct Scratch {
  fs::path root, model, work;
  Scratch() {
    root = fs::temp_directory_path() / ("tern-fuzz-" + std::to_string(::getpid()));
    model = root / "model";
    work = root / "work";
    fs::remove_all(root);
    fs::create_directories(model);
    fs::create_directories(work);
    fs::create_directories(root / "outside");
    std::string bytes(4096, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i);
    write(model / "weights.bin", bytes);
    write(root / "outside" / "secret.bin", bytes);
    fs::create_symlink("../outside/secret.bin", model / "link.bin");
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  static void write(const fs::path& p, const std::string& bytes) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) fail("fuzz harness: cannot write '", p.string(), "'");
  }
  // An empty folder under work/ for one target.
  fs::path fresh(const char* name) {
    fs::path d = work / name;
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

std::string as_string(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

SessionOptions fuzz_session_options() {
  SessionOptions o;
  o.threads = 1;
  o.max_memory = kMemoryCap;
  o.pack = SessionOptions::Pack::Ignore;
  return o;
}

// One run with small inputs: symbolic dims 2, declared dims as declared (nothing past 4096 elements a
// feed; larger declared inputs are left unrun), values zero (valid token ids, positions and masks).
void run_once(Session& s) {
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const IOInfo& in : s.inputs()) {
    DType dt = in.dtype == DType::Undefined ? DType::Float32 : in.dtype;
    Shape shape;
    int64_t numel = 1;
    if (in.shape)
      for (const Dim& d : *in.shape) {
        int64_t v = d.is_known() ? d.value : 2;
        if (v > 4096 || numel * v > 4096) return;
        shape.push_back(v);
        numel *= v;
      }
    Tensor t(dt, shape);
    if (t.nbytes()) std::memset(t.raw(), 0, t.nbytes());
    feeds.emplace_back(in.name, std::move(t));
  }
  s.run(feeds);
}

// ONNX model bytes: load, shape inference, passes, prepare, one run.
void onnx_model(const uint8_t* data, size_t size) {
  const fs::path path = scratch().model / "model.onnx";
  Scratch::write(path, as_string(data, size));
  Session s(path.string(), fuzz_session_options());
  run_once(s);
}

// An initializer stored as external data, its reference spelled by the input's lines:
// location, offset, length, data type (ONNX number), dims (comma separated). Missing lines are left out of
// the reference. The tensor's bytes are all read once loaded.
void external_data(const uint8_t* data, size_t size) {
  std::vector<std::string> lines;
  std::string text = as_string(data, size), line;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      lines.push_back(line);
      line.clear();
    } else {
      line += text[i];
    }
  }
  onnx::ModelProto mp;
  mp.set_ir_version(10);
  mp.add_opset_import()->set_version(21);
  auto* g = mp.mutable_graph();
  g->set_name("external_data");
  auto* t = g->add_initializer();
  t->set_name("w");
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  const char* keys[] = {"location", "offset", "length"};
  for (size_t k = 0; k < 3 && k < lines.size(); ++k) {
    auto* kv = t->add_external_data();
    kv->set_key(keys[k]);
    kv->set_value(lines[k]);
  }
  t->set_data_type(lines.size() > 3 ? std::atoi(lines[3].c_str()) : 1);
  if (lines.size() > 4) {
    std::string dims = lines[4];
    for (size_t at = 0; at < dims.size();) {
      size_t comma = dims.find(',', at);
      if (comma == std::string::npos) comma = dims.size();
      t->add_dims(std::atoll(dims.substr(at, comma - at).c_str()));
      at = comma + 1;
    }
  }
  g->add_output()->set_name("w");
  Model m = load_onnx(mp, (scratch().model / "model.onnx").string());
  const Value& v = m.graph->values[static_cast<size_t>(m.graph->find_value("w"))];
  const auto* bytes = static_cast<const uint8_t*>(v.constant->raw());
  unsigned sum = 0;
  for (size_t i = 0; i < v.constant->nbytes(); ++i) sum += bytes[i];
  if (sum == 0xFFFFFFFFu) std::abort();  // keeps the reads
}

// Text a tokenizer must encode and decode whatever it is: ASCII, multi-byte UTF-8, invalid UTF-8, a NUL.
const std::vector<std::string>& sample_texts() {
  static const std::vector<std::string> texts = {"",
                                                 "Hello, world! 123 4567",
                                                 "  leading spaces\n\ttabs\r\n",
                                                 "naïve café — 日本語 🙂",
                                                 std::string("nul\0byte", 8),
                                                 "\xff\xfe invalid \xc3",
                                                 "<|endoftext|><s></s>[INST]"};
  return texts;
}

void exercise_tokenizer(const llm::Tokenizer& tok) {
  const int64_t vocab = tok.vocab_size();
  for (const std::string& text : sample_texts())
    for (bool bos : {false, true}) {
      std::vector<int64_t> ids = tok.encode(text, bos);
      for (int64_t id : ids)
        if (id < 0 || id >= vocab)  // not bad input: a bug, so not a tern::Error
          throw std::logic_error("encode gave id " + std::to_string(id) + " outside the vocabulary of " + std::to_string(vocab));
      tok.decode(ids);
    }
  std::vector<int64_t> all;
  for (int64_t id = 0; id < std::min<int64_t>(vocab, 1024); ++id) all.push_back(id);
  tok.decode(all);
  llm::TextStream stream(tok);
  for (int64_t id : all) stream.push(id);
  stream.flush();
}

// tokenizer.json bytes: load, encode the sample texts, decode every id (up to 1024).
void tokenizer_json(const uint8_t* data, size_t size) {
  const fs::path path = scratch().fresh("tokenizer_json") / "tokenizer.json";
  Scratch::write(path, as_string(data, size));
  exercise_tokenizer(*llm::load_hf_tokenizer(path.string()));
}

// A real tokenizer (byte-level BPE, SentencePiece-style BPE with byte fallback, the Llama-3 and Qwen split
// rules, WordPiece with BERT's normalizer), picked by a byte; loaded once. `lossless`: a word decodes back to
// itself (not BERT's, which lowercases and makes a word of over 100 characters one [UNK]).
const llm::Tokenizer& real_tokenizer(uint8_t pick, bool* lossless = nullptr) {
  static const std::pair<const char*, bool> kFolders[] = {{"models/default", true},
                                                          {"tests/fixtures/exports/gpt2-optimum", true},
                                                          {"tests/fixtures/exports/llama-optimum", true},
                                                          {"tests/fixtures/exports/qwen3-optimum", true},
                                                          {"tests/fixtures/exports/gemma2-optimum", true},
                                                          {"tests/fixtures/exports/smollm2-optimum", true},
                                                          {"tests/fixtures/encoders/bert-optimum", false}};
  constexpr size_t kCount = sizeof kFolders / sizeof kFolders[0];
  static std::vector<std::unique_ptr<llm::Tokenizer>> toks(kCount);
  const size_t i = pick % kCount;
  if (!toks[i]) toks[i] = llm::load_tokenizer(std::string(TERN_SOURCE_DIR) + "/" + kFolders[i].first);
  if (lossless) *lossless = kFolders[i].second;
  return *toks[i];
}

// Text through real tokenizers: the first byte picks the tokenizer, the rest is encoded; then the rest, read as
// little-endian 16-bit ids (some outside the vocabulary), is decoded and streamed.
void tokenizer_text(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const llm::Tokenizer& tok = real_tokenizer(data[0]);
  const std::string text = as_string(data + 1, size - 1);
  tok.decode(tok.encode(text, true));
  std::vector<int64_t> ids;
  for (size_t i = 1; i + 1 < size; i += 2) ids.push_back(data[i] | data[i + 1] << 8);
  llm::TextStream stream(tok);
  for (int64_t id : ids) {
    try {
      stream.push(id);
    } catch (const Error&) {  // an id outside the vocabulary: refused, and the stream goes on
    }
  }
  stream.flush();
}

// One long unbroken word, as a base64 blob or a minified file sends (issue 51): the first byte picks a real
// tokenizer, the next two a length (up to 65,535 letters), the rest a pattern of letters repeated to that length.
// The merge loop must stay O(n log n) — a quadratic one runs past libFuzzer's 10 s here — and the word must come
// back whole from its ids.
void tokenizer_long_word(const uint8_t* data, size_t size) {
  if (size < 4) return;
  bool lossless = true;
  const llm::Tokenizer& tok = real_tokenizer(data[0], &lossless);
  std::string word(static_cast<size_t>(data[1] | data[2] << 8), 'a');
  for (size_t i = 0; i < word.size(); ++i) {
    const int letter = data[3 + i % (size - 3)] % 52;
    word[i] = static_cast<char>(letter < 26 ? 'a' + letter : 'A' + letter - 26);
  }
  const std::vector<int64_t> ids = tok.encode(word, false);
  for (int64_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) throw std::logic_error("encode gave id " + std::to_string(id) + " outside the vocabulary");
  if (const std::string back = tok.decode(ids); lossless && back != word && back != " " + word)
    throw std::logic_error("a word of " + std::to_string(word.size()) + " letters decoded to " + std::to_string(back.size()) + " bytes");
}

// A model folder's JSON: the first byte picks config.json, generation_config.json or genai_config.json,
// the rest is its text.
void model_config(const uint8_t* data, size_t size) {
  if (size == 0) return;
  static const char* kFiles[] = {"config.json", "generation_config.json", "genai_config.json"};
  const fs::path dir = scratch().fresh("model_config");
  Scratch::write(dir / kFiles[data[0] % 3], as_string(data + 1, size - 1));
  llm::read_model_config(dir.string());
}

// The chat template's files: the first byte picks tokenizer_config.json or chat_template.jinja, the rest is
// its text; the template found (its Jinja parsed) renders a conversation.
void chat_template(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const fs::path dir = scratch().fresh("chat_template");
  Scratch::write(dir / (data[0] % 2 ? "chat_template.jinja" : "tokenizer_config.json"), as_string(data + 1, size - 1));
  const llm::ChatTemplate chat = llm::ChatTemplate::load(dir.string());  // parses the Jinja
  if (!chat.empty())
    chat.render(std::vector<llm::ChatMessage>{{"system", "Be brief."}, {"user", "Hi <|im_end|>"}, {"assistant", "Hello."}, {"user", "?"}});
}

// A llama2.c checkpoint: its header read, the checkpoint converted to ONNX, the result loaded.
void llama2c_checkpoint(const uint8_t* data, size_t size) {
  const fs::path dir = scratch().fresh("llama2c_checkpoint");
  Scratch::write(dir / "model.bin", as_string(data, size));
  Scratch::write(dir / "tokenizer.bin", "");
  convert::read_llama2c_config((dir / "model.bin").string());
  convert::convert_llama2c((dir / "model.bin").string(), (dir / "tokenizer.bin").string(), (dir / "onnx").string());
  Session s((dir / "onnx" / "model.onnx").string(), fuzz_session_options());
}

// A llama2.c tokenizer.bin: the first two bytes are the vocabulary size the checkpoint would claim
// (little-endian, 0..65535), the rest the file.
void llama2c_tokenizer(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const fs::path path = scratch().fresh("llama2c_tokenizer") / "tokenizer.bin";
  Scratch::write(path, as_string(data + 2, size - 2));
  exercise_tokenizer(*llm::load_llama2c_tokenizer(path.string(), data[0] | data[1] << 8));
}

// A GGUF file: read, imported to ONNX (`tern import-gguf`), the result loaded.
void gguf(const uint8_t* data, size_t size) {
  const fs::path dir = scratch().fresh("gguf");
  Scratch::write(dir / "model.gguf", as_string(data, size));
  convert::GgufFile file((dir / "model.gguf").string());
  convert::import_gguf((dir / "model.gguf").string(), (dir / "onnx").string());
  Session s((dir / "onnx" / "model.onnx").string(), fuzz_session_options());
}

// A `tern pack` file beside tests/fuzz/pack_model/model.onnx (one MatMul of a constant 16x16 weight): the
// session maps what the pack claims to hold, then runs once.
void weight_pack(const uint8_t* data, size_t size) {
  const fs::path dir = scratch().work / "weight_pack";
  if (!fs::exists(dir / "model.onnx")) {
    fs::create_directories(dir);
    fs::copy_file(std::string(TERN_SOURCE_DIR) + "/tests/fuzz/pack_model/model.onnx", dir / "model.onnx");
  }
  Scratch::write(dir / "model.tern-pack", as_string(data, size));
  SessionOptions o = fuzz_session_options();
  o.pack = SessionOptions::Pack::Use;
  Session s((dir / "model.onnx").string(), o);
  run_once(s);
}

// A tern serve request body: the first byte picks /v1/completions, /v1/chat/completions or /v1/embeddings (its
// value mod 3), the rest is the body; a refusal is an ApiError (a tern::Error), the server's 400.
void serve_request(const uint8_t* data, size_t size) {
  if (size == 0) return;
  if (data[0] % 3 == 2) {
    const openai::EmbeddingRequest e = openai::parse_embedding_request(as_string(data + 1, size - 1));
    openai::to_wire(openai::embedding_response(e, e.model, std::vector<std::vector<float>>(e.inputs.size(), {0.5f, -1.0f, 3.0f}), 1));
    return;
  }
  const openai::CompletionRequest r = openai::parse_completion_request(as_string(data + 1, size - 1), data[0] % 3 == 1);
  llm::StopScanner stops(r.stop);
  const std::string text = r.chat ? r.chat_messages.back()["content"].get<std::string>() : r.prompts.empty() ? "" : r.prompts[0].text;
  stops.push(text);
  const openai::TokenLogprob lp{text, -1.0f, {{text, -1.0f}}};
  openai::Choice c{text, "stop", openai::logprobs_json(r, {lp}, 0), {}};
  openai::take_tool_calls(r, c);  // (the last message's text read as an answer that may call the request's tools)
  openai::to_wire(openai::completion_response(r, "id", 0, {c}, {}));
  if (!c.tool_calls.empty()) openai::to_wire(openai::tool_calls_chunk(r, "id", 0, 0, c.tool_calls));
}

// A JSON Schema for response_format json_schema, then text fed to the grammar it makes (split at the first NUL):
// a schema is compiled or refused (a tern::Error); the text is fed byte by byte, the closing estimate read after each.
void json_schema(const uint8_t* data, size_t size) {
  const std::string all = as_string(data, size);
  const size_t nul = all.find('\0');
  const std::string text = nul == std::string::npos ? "" : all.substr(nul + 1);
  const llm::JsonSchema compiled(parse_json(all.substr(0, nul), "the schema"));  // (as tern serve reads a request)
  llm::JsonGrammar g(&compiled);
  for (unsigned char c : text) {
    if (g.closing_bytes() < 0) throw std::logic_error("a negative closing estimate");
    if (!g.feed(c)) break;
  }
}

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"onnx_model", onnx_model, "model.onnx bytes (external data from a folder with weights.bin and an escaping symlink)"},
      {"external_data", external_data, "lines: location, offset, length, data type, dims of one external initializer"},
      {"tokenizer_json", tokenizer_json, "tokenizer.json text"},
      {"tokenizer_text", tokenizer_text, "a byte picking a real tokenizer, then text to encode and ids to decode"},
      {"tokenizer_long_word", tokenizer_long_word, "a byte picking a real tokenizer, two of length, then letters to repeat"},
      {"model_config", model_config, "a byte picking config/generation_config/genai_config.json, then its text"},
      {"chat_template", chat_template, "a byte picking tokenizer_config.json or chat_template.jinja, then its text"},
      {"llama2c_checkpoint", llama2c_checkpoint, "llama2.c model.bin bytes"},
      {"llama2c_tokenizer", llama2c_tokenizer, "two bytes of vocabulary size, then tokenizer.bin bytes"},
      {"gguf", gguf, "GGUF file bytes"},
      {"weight_pack", weight_pack, "model.tern-pack bytes beside a one-MatMul model"},
      {"serve_request", serve_request, "a byte picking completions, chat or embeddings, then a tern serve request body"},
      {"json_schema", json_schema, "a JSON Schema, a NUL, then text for the grammar it compiles to"},
  };
  return all;
}

const Target* find_target(const std::string& name) {
  for (const Target& t : targets())
    if (name == t.name) return &t;
  return nullptr;
}

}  // namespace tern::fuzz
