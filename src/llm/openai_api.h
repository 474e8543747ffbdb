// The OpenAI HTTP API as tern serve speaks it: requests of /v1/completions and /v1/chat/completions
// read and checked field by field (a wrong type or value is a 400 naming the field, in OpenAI's error
// shape; openai_request.cpp), and the response bodies and stream chunks written back (openai_api.cpp). No I/O here: tools/serve/
// moves the bytes; tern_chat_completion (the C API, Python's create_chat_completion), tests and the fuzzer call
// these directly.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "llm/chat_template.h"
#include "llm/continuous_batch.h"
#include "llm/json_schema.h"
#include "llm/model_config.h"
#include "llm/model_folder.h"
#include "llm/tokenizer.h"

namespace tern::openai {

// A request refused: the HTTP status and OpenAI's error object (message, type, param).
struct ApiError : Error {
  ApiError(int status, const std::string& message, std::string param = "", std::string type = "invalid_request_error")
      : Error(message), status(status), param(std::move(param)), type(std::move(type)) {}
  int status;
  std::string param, type;
  std::string code;   // OpenAI's error code ("invalid_api_key", "model_not_found"), or "" (null)
  std::string limit;  // the server's limit that refused it ("--queue", ...; counted in /metrics), or ""
};

// One prompt of /v1/completions (or input of /v1/embeddings): text, or token ids used as they are (no BOS added).
struct PromptInput {
  std::string text;
  std::vector<int64_t> ids;
  bool is_ids = false;
};
// A `prompt` / `input` field: a string, token ids, or a list of either (at most `most` of them). Throws ApiError naming
// `name`.
std::vector<PromptInput> read_prompts(const nlohmann::json& v, const std::string& name, size_t most);

struct CompletionRequest {
  bool chat = false;
  std::string model;
  std::vector<PromptInput> prompts;   // /v1/completions: each gets n choices (choice p·n + i)
  std::optional<int64_t> max_tokens;  // unset: until the context is full or the model stops
  llm::SamplingChoices sampling;      // temperature 0 is greedy, as OpenAI's
  std::vector<std::string> stop;      // up to 4; the text ends before the first one found
  int n = 1;                          // choices, each its own sequence (seed + i)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage
  bool echo = false;           // completions: the prompt before the completion
  bool ignore_eos = false;     // generate through the model's end-of-text tokens, to max_tokens (benchmarks)
  // -1: no logprobs; else each token's log-probability and this many most likely alternatives (chat: logprobs: true
  // and top_logprobs; completions: logprobs: N)
  int64_t logprobs = -1;
  bool json_object = false;  // response_format json_object or json_schema: the text is a JSON object (constrained decoding)
  std::shared_ptr<const llm::JsonSchema> json_schema;  // json_schema's schema, compiled (null: any object)
  // /v1/chat/completions: the messages as the template reads them ({role, content}, tool calls' arguments as
  // objects, tool results), in the request's key order, and the tools it offers (null: none; tool_choice "none"
  // offers none).
  nlohmann::ordered_json chat_messages, tools;
  // "auto": the answer may call tools (read from its text: parse_tool_calls); "required" or a named tool: it does,
  // decoded under the JSON schema of {"name", "arguments"} (json_object and json_schema are set so).
  std::string tool_choice;
  // tool_choice auto: a call's schema (tool_call_schema), each call the model begins decoded under it where the
  // template writes calls in <tool_call> blocks (choice_constraint); null when a tool's parameters are outside
  // what tern constrains (those calls are read as written).
  std::shared_ptr<const llm::JsonSchema> call_schema;
  bool calls_tools() const { return !tools.is_null(); }
};

// A tool call in an answer: its id ("call_" and random hex), the function's name and its arguments' JSON text.
struct ToolCall {
  std::string id, name, arguments;
};
// The tool calls in a finished answer of a request that offers tools, taken out of `text` (what is left is the
// message's content): a forced call's JSON object; else each <tool_call>{...}</tool_call> block (the Hermes form of
// Qwen, SmolLM3 and others' templates), or the whole text as one {"name", "arguments" | "parameters"} object (the
// Llama 3.x form). Only calls of offered tools count.
std::vector<ToolCall> parse_tool_calls(const CompletionRequest& r, std::string& text);
// The constraint a choice of `r` decodes under: response_format's or a forced call's JSON; with tool_choice auto and
// a template whose calls are <tool_call> blocks, each call the model begins (JsonConstraint's trigger); else null.
// `vocabulary` gives the tokenizer's JsonVocabulary (made once, when first needed).
std::shared_ptr<llm::JsonConstraint> choice_constraint(const CompletionRequest& r, const llm::ChatTemplate* chat,
                                                       const std::function<std::shared_ptr<const llm::JsonVocabulary>()>& vocabulary);
// The same of an answer offered `tools` (an OpenAI tools array; `forced`: the whole text is one call's object).
std::vector<ToolCall> parse_tool_calls(const nlohmann::ordered_json& tools, bool forced, std::string& text);
// Checks an OpenAI tools array (1 to 128 {type: function, function: {name, parameters}}, names unique): ApiError
// naming tools[i] otherwise. (tern chat --tools reads its file so.)
void check_tools(const nlohmann::json& tools);
// What a forced call is decoded under: {"name", "arguments"} with the function's parameters as the arguments' schema,
// of the tool `named` (empty: any of them, a union the name picks from). ApiError naming tool_choice or tools when
// that tool is not offered or its parameters are outside what tern constrains to.
std::shared_ptr<const llm::JsonSchema> tool_call_schema(const nlohmann::json& tools, const std::string& named);
// A call as an assistant message's tool_calls entry, as templates read it (its arguments an object).
nlohmann::ordered_json tool_call_message(const ToolCall& call);

// Parses and checks a request body (chat: /v1/chat/completions). Throws ApiError (400) naming the field.
// Fields OpenAI defines that tern does not implement are refused when set to anything but their
// default (logit_bias, tools, a json_schema response_format ...); fields nobody defines are ignored, as
// OpenAI-compatible servers do (clients send their own extras).
CompletionRequest parse_completion_request(std::string_view body, bool chat);

// /v1/embeddings: `input` as a string, token ids or a list of either (at most 2048, as OpenAI's), `encoding_format`
// float (default) or base64 (the openai Python client's default: each vector's float32 bytes, little-endian),
// `dimensions` accepted only as the model's own width (checked by the server, which knows it).
struct EmbeddingRequest {
  std::string model;
  std::vector<PromptInput> inputs;
  bool base64 = false;
  std::optional<int64_t> dimensions;
};
EmbeddingRequest parse_embedding_request(std::string_view body);
// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}.
nlohmann::json embedding_response(const EmbeddingRequest& r, const std::string& model, const std::vector<std::vector<float>>& vectors,
                                  int64_t prompt_tokens);

// Prompt tokens a row feeds per step, so that others keep decoding (tern serve's --prefill-chunk default; the C
// API's chat completions feed theirs so too, for the same arithmetic).
constexpr int64_t kPrefillChunk = 32;

// Choice `index` of request `r` as a sequence to generate, as tern serve runs it: `prompt`, at most `max_new_tokens`,
// the request's sampling over the model's generation_config.json (llm::sampling_options) seeded seed + index, the
// model's end tokens unless ignore_eos, the logprobs asked. Its callbacks and a JSON constraint are the caller's.
// A chat's `turn_ends` (ChatTemplate::turn_end_tokens) end it as the model's end tokens do.
llm::SequenceRequest sequence_request(const CompletionRequest& r, size_t index, std::vector<int64_t> prompt, int64_t max_new_tokens,
                                      const llm::ModelConfig& cfg, const std::vector<int64_t>& turn_ends = {});

// One choice's text as its tokens arrive: whole characters, cut before the first stop string, and how it ended.
struct ChoiceText {
  ChoiceText(const llm::Tokenizer& tok, std::vector<int64_t> prompt, std::vector<std::string> stop)
      : text(std::make_unique<llm::TextStream>(tok, std::move(prompt))), stops(std::move(stop)) {}
  // A new token: its text joins `ready`; false once a stop string has ended the choice (finish_reason "stop").
  bool push(int64_t token);
  // The sequence ended: what was held back joins `ready` (unless a stop string ended it), finish_reason is set.
  void finish(llm::FinishReason why);
  std::unique_ptr<llm::TextStream> text;
  llm::StopScanner stops;
  std::string ready;          // text not yet sent (a stream) or all of it
  std::string finish_reason;  // "stop", "length"; "" until it ends
  int64_t tokens = 0;
};

// A response's id: `prefix` ("chatcmpl-", "cmpl-") and 64 random bits in hex.
std::string random_id(const char* prefix);

// The body of an error reply: {"error": {"message", "type", "param", "code"}}.
std::string error_body(const ApiError& e);

// A generated token's log-probability and the most likely alternatives', each with its text (the token decoded alone).
struct TokenLogprob {
  std::string text;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};
// llm's TokenLogprobs with each token's text, decoded alone.
TokenLogprob token_logprob(const llm::Tokenizer& tok, const llm::TokenLogprobs& lp);
// A choice's `logprobs` for these tokens (null when the request asked for none). Chat: {"content": [{token, logprob,
// bytes, top_logprobs}]}; completions: {tokens, token_logprobs, top_logprobs, text_offset}, the offsets counted
// from `text_offset`, where the first token's text starts in the choice's text.
nlohmann::json logprobs_json(const CompletionRequest& r, const std::vector<TokenLogprob>& tokens, size_t text_offset);

struct Choice {
  std::string text;
  std::string finish_reason;  // "stop", "length", "tool_calls"
  nlohmann::json logprobs;    // logprobs_json, or null
  std::vector<ToolCall> tool_calls;
};
struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

// A whole response (stream: false). `id` like "cmpl-…" / "chatcmpl-…"; `created` in Unix seconds.
nlohmann::json completion_response(const CompletionRequest& r, const std::string& id, int64_t created, const std::vector<Choice>& choices,
                                   const Usage& usage);
// One server-sent event of a stream: choice `index`'s new text (with a finish reason on its last
// chunk, "" before) and its tokens' logprobs_json (null: none). Chat streams open each choice with a chunk whose
// delta holds the role.
nlohmann::json completion_chunk(const CompletionRequest& r, const std::string& id, int64_t created, int index, const std::string& text,
                                const std::string& finish_reason, bool role = false, const nlohmann::json& logprobs = nullptr);
// A chat request's prompt ids: its messages (tool calls and results included) and the tools it offers, in the model's
// chat template.
std::vector<int64_t> chat_prompt(const llm::Tokenizer& tok, const llm::ChatTemplate& chat, const CompletionRequest& r,
                                 const llm::CancelCheck& cancelled = {});
// A finished choice of a request that offers tools: its tool calls taken out of its text (parse_tool_calls), and
// finish_reason "tool_calls" when there are any.
void take_tool_calls(const CompletionRequest& r, Choice& c);
// A chat stream's chunk of choice `index`'s tool calls, whole (a request that offers tools is answered when its
// text is complete: whether it calls a tool is read from all of it).
nlohmann::json tool_calls_chunk(const CompletionRequest& r, const std::string& id, int64_t created, int index,
                                const std::vector<ToolCall>& calls);
// A request that offers tools streams each choice whole: when choice `index`'s finished text calls tools, the chunks
// that say so — the role's opening one unless `opened`, then the calls — with the text left in c.ready and
// c.finish_reason "tool_calls"; else none (the text goes out as any other). (tern serve's and the C API's streams.)
std::vector<nlohmann::json> tool_call_chunks(const CompletionRequest& r, const std::string& id, int64_t created, int index, ChoiceText& c,
                                             bool opened);
// The stream's usage chunk (stream_options.include_usage), after every choice finished.
nlohmann::json usage_chunk(const CompletionRequest& r, const std::string& id, int64_t created, const Usage& usage);
// JSON text of `j` for the wire: generated text need not be valid UTF-8 (a character cut by a stop, byte
// tokens of a random model), and what is not becomes U+FFFD instead of an exception.
std::string to_wire(const nlohmann::json& j);

}  // namespace tern::openai
