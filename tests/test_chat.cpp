// Chat formats: Llama-2 against the model's own Jinja template rendered by @huggingface/jinja
// (tests/goldens/chat-llama2.json); the other families against their published formats, by hand.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/chat_template.h"
#include "test_util.h"

using namespace tern::llm;
namespace fs = std::filesystem;

TEST_CASE("Llama-2 chat format equals the model's Jinja template") {
  std::ifstream f(fs::path(TERN_SOURCE_DIR) / "tests" / "goldens" / "chat-llama2.json");
  const nlohmann::json g = nlohmann::json::parse(f);
  for (const auto& c : g["cases"]) {
    std::vector<ChatMessage> msgs;
    for (const auto& m : c["messages"]) msgs.push_back({m["role"], m["content"]});
    CHECK(format_chat(ChatFamily::Llama2, msgs) == c["text"].get<std::string>());
  }
  const fs::path model = fs::path(TERN_SHARED_DIR) / "models" / "ort-genai" / "tiny-random-LlamaForCausalLM-fp16";
  if (fs::exists(model)) CHECK(detect_chat_family(model.string()) == ChatFamily::Llama2);
}

TEST_CASE("Llama-3, ChatML and Phi-3 chat formats") {
  const std::vector<ChatMessage> msgs{{"system", "Be brief."}, {"user", "Hi"}};
  CHECK(format_chat(ChatFamily::Llama3, msgs) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  CHECK(format_chat(ChatFamily::ChatML, msgs) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  CHECK(format_chat(ChatFamily::Phi3, msgs) == "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n");
  CHECK(tern::test::contains(tern::test::error_of([] { format_chat(ChatFamily::None, {{"user", "x"}}); }), "--prompt"));
}
