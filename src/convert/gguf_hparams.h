// The hyperparameters of a GGUF decoder — shape, sliding windows, soft-caps, RoPE and its scaling — read from
// its metadata and checked: an implausible value fails naming its key, and every key that changes the math in
// a way tern does not import (experts, ALiBi, clamped or scaled activations, RoPE kinds other than linear and
// YaRN) fails naming the key, rather than import a model that would silently compute something else.
// What each key means is llama.cpp's (llama-model.cpp reads them); the RoPE scaling is computed as
// transformers computes it (modeling_rope_utils.py), which tests/test_gguf_architectures.cpp checks.
#pragma once
#include <cstdint>
#include <vector>

#include "convert/architecture.h"
#include "convert/decoder_onnx.h"
#include "convert/gguf.h"

namespace tern::convert {

// How the global layers' RoPE frequencies are scaled (the windowed layers' own base, Gemma 3's, is unscaled,
// as in transformers and llama.cpp).
struct RopeScaling {
  enum class Kind { None, Linear, Yarn } kind = Kind::None;
  double factor = 1;                     // rope.scaling.factor (or the older rope.scale_linear)
  int64_t original_context = 0;          // YaRN: rope.scaling.original_context_length (0: context_length)
  double beta_fast = 32, beta_slow = 1;  // YaRN: rope.scaling.yarn_beta_fast / _slow
  const GgufTensor* divisors = nullptr;  // rope_freqs.weight: each frequency divided by its own factor (Llama 3.1)
};

struct GgufHparams {
  DecoderShape shape;      // vocab left 0: the token table gives it
  int64_t context = 0;     // context_length: the RoPE tables' rows
  double theta = 0;        // rope.freq_base
  double local_theta = 0;  // the windowed layers' own RoPE base; 0: theirs is the global table
  RopeScaling rope;
};

GgufHparams read_gguf_hparams(const GgufFile& f, const Architecture& arch);

// The global (and, with local_theta, the windowed layers') RoPE tables of `h` into w.cos/sin (cos_local/sin_local).
void gguf_rope_tables(const GgufHparams& h, DecoderWeights& w);

}  // namespace tern::convert
