// Every op family registers itself here. To find where an ONNX node becomes a kernel: look up its
// op_type in the register_* function of the matching file in src/ops/.
#pragma once

namespace tern {

class OpRegistry;

void register_elementwise_binary(OpRegistry& r);      // elementwise_binary.cpp
void register_elementwise_unary(OpRegistry& r);       // elementwise_unary.cpp
void register_shape_ops(OpRegistry& r);               // shape_ops.cpp
void register_transpose(OpRegistry& r);               // transpose.cpp
void register_concat_split(OpRegistry& r);            // concat_split.cpp
void register_slice(OpRegistry& r);                   // slice.cpp
void register_pad_tile(OpRegistry& r);                // pad_tile.cpp
void register_gather_scatter(OpRegistry& r);          // gather_scatter.cpp
void register_matmul(OpRegistry& r);                  // matmul.cpp
void register_softmax(OpRegistry& r);                 // softmax.cpp
void register_reduce(OpRegistry& r);                  // reduce.cpp
void register_normalization(OpRegistry& r);           // normalization.cpp
void register_rotary_embedding(OpRegistry& r);        // rotary_embedding.cpp
void register_attention(OpRegistry& r);               // attention.cpp
void register_contrib_attention(OpRegistry& r);       // contrib_attention.cpp (com.microsoft)
void register_group_query_attention(OpRegistry& r);   // group_query_attention.cpp (com.microsoft)
void register_matmul_nbits(OpRegistry& r);            // matmul_nbits.cpp (com.microsoft)
void register_cached_attention(OpRegistry& r);        // cached_attention.cpp (tern: made by fusion)
void register_swiglu(OpRegistry& r);                  // swiglu.cpp (tern: made by fusion)
void register_last_position(OpRegistry& r);           // last_position.cpp (tern: made for generation)
void register_dims_of(OpRegistry& r);                 // dims_of.cpp (tern: made by resolve_shape_values)
void register_tensor_scatter(OpRegistry& r);          // tensor_scatter.cpp
void register_trilu(OpRegistry& r);                   // trilu.cpp
void register_cumsum(OpRegistry& r);                  // cumsum.cpp
void register_topk(OpRegistry& r);                    // topk.cpp
void register_nonzero(OpRegistry& r);                 // nonzero.cpp
void register_gather_block_quantized(OpRegistry& r);  // gather_block_quantized.cpp (com.microsoft)
void register_quantize_linear(OpRegistry& r);         // quantize_linear.cpp
void register_matmul_integer(OpRegistry& r);          // matmul_integer.cpp (and com.microsoft's integer products)
void register_matmul_bnb4(OpRegistry& r);             // matmul_bnb4.cpp (com.microsoft)
void register_if(OpRegistry& r);                      // if.cpp (subgraphs: subgraph.h)
void register_loop(OpRegistry& r);                    // loop.cpp
void register_scan(OpRegistry& r);                    // scan.cpp

#ifdef TERN_OPENCL
// OpenCL variants (opencl/<op>_opencl.cpp), built with -DTERN_OPENCL=ON: sessions on a device get these
// for their nodes instead of the CPU ops (OpRegistry::create).
void register_add_opencl(OpRegistry& r);
void register_gather_opencl(OpRegistry& r);
void register_matmul_opencl(OpRegistry& r);
void register_matmul_nbits_opencl(OpRegistry& r);
void register_normalization_opencl(OpRegistry& r);
void register_swiglu_opencl(OpRegistry& r);
void register_last_position_opencl(OpRegistry& r);
void register_cached_attention_opencl(OpRegistry& r);
#endif

inline void register_all_ops(OpRegistry& r) {
  register_elementwise_binary(r);
  register_elementwise_unary(r);
  register_shape_ops(r);
  register_transpose(r);
  register_concat_split(r);
  register_slice(r);
  register_pad_tile(r);
  register_gather_scatter(r);
  register_matmul(r);
  register_softmax(r);
  register_reduce(r);
  register_normalization(r);
  register_rotary_embedding(r);
  register_attention(r);
  register_contrib_attention(r);
  register_group_query_attention(r);
  register_matmul_nbits(r);
  register_cached_attention(r);
  register_swiglu(r);
  register_last_position(r);
  register_dims_of(r);
  register_tensor_scatter(r);
  register_trilu(r);
  register_cumsum(r);
  register_topk(r);
  register_nonzero(r);
  register_gather_block_quantized(r);
#ifndef TERN_MINIMAL  // transformers.js's 8-bit and bnb4 graphs: not in the embedded build's size budget
  register_quantize_linear(r);
  register_matmul_integer(r);
  register_matmul_bnb4(r);
#endif
#ifndef TERN_MINIMAL  // control flow, run node by node: a merged decoder's If is folded at load without it
  register_if(r);
  register_loop(r);
  register_scan(r);
#endif
#ifdef TERN_OPENCL
  register_add_opencl(r);
  register_gather_opencl(r);
  register_matmul_opencl(r);
  register_matmul_nbits_opencl(r);
  register_normalization_opencl(r);
  register_swiglu_opencl(r);
  register_last_position_opencl(r);
  register_cached_attention_opencl(r);
#endif
}

}  // namespace tern
