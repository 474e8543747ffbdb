#include "tools/cli/cli.h"

#include <malloc.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#ifdef TERN_SERVE
#include "llm/embedder.h"
#include "tools/serve/server.h"
#endif

namespace tern::cli {

int serve(int argc, char** argv) {
#ifndef TERN_SERVE
  fail_unsupported("this tern was built without tern serve (-DTERN_SERVE=OFF)");
#else
  Flags f = parse(argc, argv, *find_command("serve"));
  const std::string model = f.get("model");
  serve::ServerOptions o;
  o.model_path = model.ends_with(".gguf") ? model_files(model).dir : model;
  o.dtype = f.get("dtype");
  o.model_name = f.get("model-name");
  o.embedding_model = f.get("embedding-model");
  o.decoder_embeddings = f.has("embeddings");
  if (f.has("pooling") && !o.decoder_embeddings) fail("--pooling is for --embeddings (an encoder's folder says its own)");
  o.pooling = llm::parse_pooling(f.get("pooling"));
  o.host = f.get("host");
  o.port = static_cast<int>(f.integer("port", 0));
  if (o.port > 65535) fail("--port ", o.port, ": at most 65535");
  o.parallel = f.integer("parallel", 1);
  o.queue = f.integer("queue", 0);
  o.prefill_chunk = f.integer("prefill-chunk", 0);
  o.prefix_cache = !f.has("no-prefix-cache");
  o.speculate = f.get("speculate");
  o.draft_model = f.has("draft-model") ? model_files(f.get("draft-model")).dir : "";
  o.timeout_s = f.number("timeout");
  o.grace_s = f.number("grace");
  o.max_body_bytes = static_cast<size_t>(f.integer("max-body", 1024));
  o.max_prompt_tokens = (f.has("max-prompt-tokens") ? f.integer("max-prompt-tokens", 0) : 0);
  o.max_tokens = (f.has("max-tokens") ? f.integer("max-tokens", 0) : 0);
  // (the key from the environment keeps it out of `ps`; the flag wins)
  const char* env_key = std::getenv("TERN_API_KEY");
  o.api_key = f.has("api-key") ? f.get("api-key") : env_key ? env_key : "";
  // An empty key given is a mistake (an unset shell variable), never a way to turn authentication off.
  if (f.has("api-key") && o.api_key.empty()) fail("--api-key is empty: give the key, or leave the flag out to serve without one");
  if (!f.has("api-key") && env_key && !*env_key) fail("TERN_API_KEY is set but empty: give the key, or unset it to serve without one");
  o.cors_origin = f.get("cors-origin");
  o.decoder = decoder_options(f);
  // Request bodies (up to 8 MB) are malloc'd and freed on many HTTP threads; with glibc's sliding mmap threshold
  // they come to live in its arenas, which keep them: 50 requests of 7.8 MB grew the server from 27 to 139 MB
  // RSS, never returned. A fixed 1 MiB threshold maps and unmaps each: 28 to 38 MB (tests/serve/soak.py).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // SIGINT / SIGTERM stop the server from a thread of its own (nothing is done inside a signal handler): the first
  // lets running requests finish within --grace seconds, a second ends them at once.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts: all inherit it
  serve::Server server(o);
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    for (int signals_seen = 0;; ++signals_seen) {
      int sig = 0;
      sigwait(&signals, &sig);
      if (returned) return;
      std::cerr << "tern serve: " << strsignal(sig) << ": stopping";
      if (signals_seen == 0) std::cerr << "; running requests get " << o.grace_s << " s to finish (--grace; a second signal ends them now)";
      std::cerr << std::endl;
      server.stop();
    }
  });
  const bool ok = server.run();
  returned = true;
  pthread_kill(waiter.native_handle(), SIGTERM);  // (wakes the waiter, which returns)
  waiter.join();
  if (!ok) fail("cannot listen on ", o.host, ":", o.port, " (in use, or not an address of this machine)");
  std::cerr << "tern serve: stopped\n";
  return 0;
#endif
}

}  // namespace tern::cli
