// GGUF → ONNX model folder (`tern import-gguf`): a converter, so the runtime stays ONNX-only. GGUFs of the
// families in architecture.h (llama: Llama, SmolLM, Mistral-style; qwen2; qwen3; phi3; gemma2; gemma3) become
// write_decoder_onnx's graph with the weights' exact values: quantized projections become com.microsoft
// MatMulNBits blocks (nbits_projection: no requantization, no float copy), a quantized token table
// com.microsoft GatherBlockQuantized over the same blocks (with float zero points, for the types with mins, an
// extension of the op that ONNX Runtime refuses); float types become float32 as ggml computes them. The folder
// also gets config.json, generation_config.json, tokenizer.json built from the GGUF tokenizer metadata
// (gguf_tokenizer.h) and the chat template. Other architectures, tokenizers and types fail naming the
// architecture or the tensor.
#pragma once
#include <string>

#include "convert/decoder_onnx.h"
#include "convert/gguf.h"
#include "core/progress.h"

namespace tern::convert {

// `progress`: a step per layer converted, one for the graph and weights written, one for the tokenizer.
void import_gguf(const std::string& gguf_path, const std::string& out_dir, const Progress& progress = {});

// The model folder for a GGUF file, imported there once: cache_dir("gguf")/<stem>-<content hash> (XXH3 of the
// file, as packs are keyed; remembered per path with the file's stamp, so an unchanged file is not hashed
// again, and a replaced one — even of the same size with its mtime set back — is imported again and its old
// folder removed), written as a StagedFolder (a killed import leaves nothing half-written) under a file lock
// (concurrent first runs: one imports, the others wait and reuse it). `imported` says whether this call
// imported it. What `tern generate --model FILE.gguf`, tern_model_load and Python's tern.Model share.
std::string gguf_model_folder(const std::string& gguf_path, bool* imported = nullptr, const Progress& progress = {});

// A [N rows, K] matrix of ggml blocks of type `t` as x · W in MatMulNBits blocks, one per ggml sub-block
// (32 values; 16 for Q2_K, Q3_K, Q6_K): 4 bits for types of at most 4 bits, 8 bits for the 5-, 6- and 8-bit
// ones (q shifted so the type's zero lands on 128, the default zero point). A zero point that is not the
// default (Q3_K's 4 in 4 bits) and a min (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K: d·q − m) become a float zero point
// zero − offset/scale: (q − zp)·scale is ggml's value to a float rounding, exactly ggml's value otherwise
// (and a sub-block of scale 0 with a min, a constant, is exactly q = 0, zero point −1, scale the constant).
// Without blocks (undefined) for float types and Q8_1/Q8_K.
Projection nbits_projection(GgmlType t, const uint8_t* data, int64_t K, int64_t N);

}  // namespace tern::convert
