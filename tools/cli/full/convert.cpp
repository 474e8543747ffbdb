#include "tools/cli/cli.h"

#include <iostream>

#include "convert/llama2c.h"
#include "core/output_files.h"

namespace tern::cli {

int convert(int argc, char** argv) {
  Flags f = parse(argc, argv, *find_command("convert"));
  if (f.get("format") != "llama2c") fail("tern convert: unknown format '", f.get("format"), "' (it converts llama2c)");
  if (!f.has("tokenizer") || !f.has("out")) fail("convert llama2c needs --tokenizer and --out");
  StagedFolder out(f.get("out"));  // all or nothing: a kill leaves the earlier folder or the new one
  convert::convert_llama2c(f.get("model"), f.get("tokenizer"), out.path().string());
  out.commit();
  auto c = convert::read_llama2c_config(f.get("model"));
  std::cout << "wrote " << f.get("out") << ": " << c.n_layers << " layers, dim " << c.dim << ", " << c.n_heads << " heads (" << c.n_kv_heads
            << " kv), vocab " << c.vocab_size << ", context " << c.seq_len << "\n";
  return 0;
}

}  // namespace tern::cli
