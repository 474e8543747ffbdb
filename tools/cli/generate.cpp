#include "tools/cli/cli.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "llm/chat_template.h"
#include "llm/generator.h"
#include "llm/tokenizer.h"

namespace tern::cli {

namespace {

std::vector<std::vector<int64_t>> parse_ids(const std::string& text) {
  std::vector<std::vector<int64_t>> rows(1);
  std::string num;
  auto flush = [&] {
    if (num.empty()) return;
    rows.back().push_back(to_int(num, "--ids"));
    num.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ') flush();
    else if (c == ';') {
      flush();
      rows.emplace_back();
    } else num += c;
  }
  flush();
  for (const auto& r : rows)
    if (r.empty()) fail("--ids: empty row in '", text, "'");
  return rows;
}

}  // namespace

int generate(int argc, char** argv) {
  Flags f = parse(argc, argv, *find_command("generate"));
  const llm::ModelFiles files = model_or_default(f, argv[0]);
  const std::string &model_path = files.onnx, &dir = files.dir;
  llm::ModelConfig cfg = llm::read_model_config(dir);
  const bool ring_possible = !f.has("no-cache");
  Session session(model_path, with_load_progress(llm::decoder_session_options(decoder_options(f), cfg, ring_possible)));
  warn_if_graph_cache(session);
  llm::Generator gen(session, cfg);

  std::vector<std::string> prompts = f.all("prompt");
  if (f.has("prompt-file")) {
    std::ifstream pf(f.get("prompt-file"));
    if (!pf) fail("cannot read --prompt-file '", f.get("prompt-file"), "'");
    prompts.emplace_back(std::string(std::istreambuf_iterator<char>(pf), {}));
  }
  std::unique_ptr<llm::Tokenizer> tok;
  std::vector<std::vector<int64_t>> ids;
  std::vector<int64_t> turn_ends;  // (--chat: the template's turn-end tokens end a sequence too)
  if (f.has("ids")) {
    if (!prompts.empty()) fail("give --ids or --prompt, not both");
    ids = parse_ids(f.get("ids"));
    try {
      tok = llm::load_tokenizer(dir);
    } catch (const Error&) {
    }  // text output is optional
  } else {
    tok = llm::load_tokenizer(dir);  // says what is missing when there is no tokenizer
    if (prompts.empty()) prompts.emplace_back("");
    const llm::ChatTemplate chat = f.has("chat") ? llm::ChatTemplate::load(dir) : llm::ChatTemplate{};
    if (f.has("chat")) std::cerr << "chat template: " << (chat.empty() ? "none (the messages as one text)" : chat.origin()) << "\n";
    turn_ends = chat.turn_end_tokens(*tok);
    for (const auto& p : prompts) {
      if (!f.has("chat")) {
        ids.push_back(tok->encode(p, true));
        continue;
      }
      std::vector<llm::ChatMessage> msgs;
      if (f.has("system")) msgs.push_back({"system", f.get("system")});
      msgs.push_back({"user", p});
      ids.push_back(llm::encode_chat(*tok, chat, msgs));
    }
  }
  llm::GenerateOptions opt;
  opt.max_new_tokens = f.integer("max-new-tokens");
  opt.use_cache = !f.has("no-cache");
  if (f.has("prefill-chunk")) opt.prefill_chunk = f.integer("prefill-chunk");
  opt.eos_token_ids = llm::with_ends(cfg.eos_token_ids, turn_ends);
  opt.sampling = llm::sampling_options(sampling_choices(f), cfg);
  opt.num_beams = static_cast<int>(f.integer("num-beams", 1));
  opt.length_penalty = f.number("length-penalty");
  opt.early_stopping = f.has("early-stopping");
  opt.min_new_tokens = f.integer("min-new-tokens");
  opt.top_logits = f.integer("top-logits");
  const DraftModelRun draft = load_draft_model(f, files, cfg, tok.get());
  opt.speculation = llm::parse_speculation(f.get("speculate"), draft.model.get());
  if (opt.top_logits > 0 && (!f.has("json") || opt.num_beams > 1)) fail("--top-logits needs --json and no beam search");

  const bool json = f.has("json"), stream = !json && ids.size() == 1 && tok && opt.num_beams == 1;
  std::unique_ptr<llm::TextStream> out;
  gen.check_request(ids, opt);  // (before the prompt is printed)
  if (stream) {                 // the prompt as the tokenizer reads it back, then each new token's text
    out = std::make_unique<llm::TextStream>(*tok);
    for (int64_t t : ids[0]) std::cout << out->push(t);
    std::cout << std::flush;
  }
  // New text per sequence, for --stop: a sequence ends with the token that completes a stop string (printed,
  // as everything generated is; tern serve and the C API hold the stop string back instead).
  const std::vector<std::string> stops = f.all("stop");
  std::vector<std::unique_ptr<llm::TextStream>> texts_so_far;
  std::vector<llm::StopScanner> scans;
  if (tok && !stops.empty())
    for (size_t b = 0; b < ids.size(); ++b) {
      texts_so_far.push_back(std::make_unique<llm::TextStream>(*tok, ids[b]));
      scans.emplace_back(stops);
    }
  auto res = gen.generate(ids, opt, [&](size_t b, int64_t t) {
    if (stream) std::cout << out->push(t) << std::flush;
    if (scans.empty()) return true;
    scans[b].push(texts_so_far[b]->push(t));
    return !scans[b].stopped();
  });
  if (stream) std::cout << out->flush() << std::endl;  // (flushed before the stderr stats line)
  std::vector<std::string> texts;
  for (const auto& t : res.tokens) texts.push_back(tok ? tok->decode(t) : "");
  if (!json && !stream)
    for (size_t b = 0; b < texts.size(); ++b) {
      if (tok) std::cout << texts[b] << "\n";
      else {
        for (int64_t t : res.tokens[b]) std::cout << t << " ";
        std::cout << "\n";
      }
    }
  const double prefill_tps = res.prefill_ms > 0 ? 1000.0 * static_cast<double>(res.prompt_tokens) / res.prefill_ms : 0;
  const double per_token = res.decode_tokens ? res.decode_ms / static_cast<double>(res.decode_tokens) : 0;
  if (json) {
    nlohmann::json j;
    j["tokens"] = res.tokens;
    j["text"] = texts;
    j["prefill_ms"] = res.prefill_ms;
    j["decode_ms_per_token"] = per_token;
    if (opt.top_logits > 0) j["top_logits"] = res.top_logits;  // [sequence][step] → [[token, logit], …]
    // Generated bytes need not be valid UTF-8 (byte tokens, random weights): replace, never fail.
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  if (f.has("stats") && opt.speculation.drafts > 0)
    std::cerr << "speculation: " << res.accepted_tokens << " of " << res.drafted_tokens << " drafted tokens accepted, " << res.decode_tokens
              << " tokens in " << res.decode_steps << " decode runs\n";
  if (f.has("stats"))
    std::cerr << "per decode step: weights " << res.weight_bytes_per_token << " bytes read; KV cache " << res.cache_bytes_per_token
              << " bytes moved ("
              << (session.passes().cached_layers > 0 ? "ring buffer: held keys/values read, one slot written"
                                                     : "graph cache: past read, copied into present, read by attention")
              << ")\n";
  std::cerr << "prefill: " << res.prompt_tokens << " tokens, " << static_cast<int64_t>(prefill_tps)
            << " tok/s; decode: " << res.decode_tokens * static_cast<int64_t>(ids.size()) << " tokens, "
            << (per_token > 0 ? static_cast<int64_t>(1000.0 * static_cast<double>(ids.size()) / per_token) : 0) << " tok/s\n";
  return 0;
}

}  // namespace tern::cli
