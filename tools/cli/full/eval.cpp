#include "tools/cli/cli.h"

#include <fstream>
#include <iostream>

#include "diagnostics/evaluate.h"
#include "kernels/cpu/gemv.h"
#include "llm/tokenizer.h"

namespace tern::cli {

int eval(int argc, char** argv) {
  Flags f = parse(argc, argv, *find_command("eval"));
  if (!f.has("model") || !f.has("text")) fail("tern eval needs a model (MODEL or --model PATH) and --text FILE");
  const llm::ModelFiles files = model_files(f.get("model"), f.get("dtype"));
  const std::string &model_path = files.onnx, &dir = files.dir;
  std::ifstream in(f.get("text"), std::ios::binary);
  if (!in) fail("cannot read text file '", f.get("text"), "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const llm::ModelConfig cfg = llm::read_model_config(dir);
  const auto tokenizer = llm::load_tokenizer(dir);  // says what is missing when there is none
  SessionOptions so;
  if (f.has("threads")) so.threads = static_cast<int>(f.integer("threads", 1));
  so.weights = parse_weight_format(f.get("weights"));
  so.activations = parse_activation_format(f.get("activations"));
  so.every_row_as_decode = true;  // the arithmetic generation decodes with, not a prefill's (bf16 tiles on AMX)
  const int64_t context = f.has("context") ? f.integer("context", 1) : cfg.context_length > 0 ? cfg.context_length : 512;
  if (f.has("kv-dtype")) {  // a ring as long as the window: nothing slides
    so.decoder.kv_dtype = llm::parse_kv_dtype(f.get("kv-dtype"));
    so.decoder.ring_capacity = context;
  }
  Session session(model_path, with_load_progress(so));
  llm::Generator generator(session, cfg);
  const auto ids = tokenizer->encode(text, true);
  const auto bos = tokenizer->encode("", true);  // [BOS] when the tokenizer adds one
  // On the ring kGemvMaxRows positions a run: each is attended as decode attends it (a speculative check's rows, the
  // same bits), where a longer run takes prefill's chunk kernel, which reads a quantized ring's newest tokens exact only
  // as of the run's end (KvRingBuffer::exact_from). Gemma-3-270M's q4_0 perplexity in runs of 256: 12.1145, of 4: 11.891
  // (fp32 ring 11.8317 / 11.842). And a window's logits at once would be 2.1 GB at Gemma-3's vocabulary.
  const auto r = llm::perplexity(generator, ids, context, f.has("second-half"), bos.empty() ? -1 : bos[0], terminal_progress("scoring"),
                                 f.has("kv-dtype") ? kernels::kGemvMaxRows : 0);
  std::cout << "tokens " << ids.size() << ", predictions " << r.predictions << ", mean NLL " << r.mean_nll << " nats, perplexity "
            << r.perplexity() << "\n";
  return 0;
}

}  // namespace tern::cli
