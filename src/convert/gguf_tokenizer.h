// The vocabulary of a GGUF file as a Hugging Face tokenizer.json, which tern and HF tokenizers both read:
// tokenizer.ggml.model "gpt2" (byte-level BPE: tokens, merges and the pre-tokenizer llama.cpp names) and
// "llama" (SentencePiece: tokens with scores, byte fallback, an optional space prefix), the latter written as
// Hugging Face's converters write SentencePiece BPE models — merges ranked by the merged piece's score.
#pragma once
#include <nlohmann/json.hpp>

#include "convert/gguf.h"

namespace tern::convert {

// Fails naming the file and the key for a tokenizer model or pre-tokenizer tern does not import.
nlohmann::json gguf_tokenizer_json(const GgufFile& f);

}  // namespace tern::convert
