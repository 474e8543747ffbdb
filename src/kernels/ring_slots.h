// The ring KV cache's slot rule, written once for the CPU ring (kernels/cpu/kv_ring_buffer) and the
// OpenCL one (kernels/opencl/decoder.cl, into which cmake/embed_opencl.cmake pastes this file): the
// same C subset compiles as C++ and as OpenCL C.
//
// A window of W slots, the first `sinks` of them kept for the first tokens (attention sinks). Token t
// sits in slot t while the window fills; after that the non-sink tokens cycle through slots [sinks, W).
// Window index i counts the sinks first, then the held tokens from oldest to newest.
#ifndef TERN_KERNELS_RING_SLOTS_H
#define TERN_KERNELS_RING_SLOTS_H

#ifdef __OPENCL_VERSION__
typedef long ring_int;
#else
#include <cstdint>
namespace tern::kernels {
typedef int64_t ring_int;
#endif

// The slot of the t-th token a sequence appends (t from 0).
static inline ring_int ring_slot_of_token(ring_int t, ring_int W, ring_int sinks) { return t < W ? t : sinks + (t - sinks) % (W - sinks); }

// The token (counted from 0) at window index i once a sequence has appended `seen` tokens: past the sinks of a
// full window, the (W − i)-th newest.
static inline ring_int ring_token_of_index(ring_int i, ring_int seen, ring_int W, ring_int sinks) {
  return seen <= W || i < sinks ? i : seen - (W - i);
}

// The slot of window index i once a sequence has appended `seen` tokens.
static inline ring_int ring_slot_of_index(ring_int i, ring_int seen, ring_int W, ring_int sinks) {
  return ring_slot_of_token(ring_token_of_index(i, seen, W, sinks), W, sinks);
}

// The first window index holding token t or a later one (t ≤ seen; the window keeps its tokens in order).
static inline ring_int ring_index_of_token(ring_int t, ring_int seen, ring_int W, ring_int sinks) {
  if (seen <= W || t < sinks) return t;
  return t - (seen - W) > sinks ? t - (seen - W) : sinks;  // (tokens evicted between the sinks and the window)
}

// Slots allocated to hold `need` tokens when `have` are: memory follows use — 256 first, then at
// least doubling (each growth copies the held tokens once) — and never more than the window.
static inline ring_int ring_slots_for(ring_int have, ring_int need, ring_int W) {
  if (need <= have) return have;
  ring_int slots = 2 * have > 256 ? 2 * have : 256;
  if (slots < need) slots = need;
  return slots < W ? slots : W;
}

#ifndef __OPENCL_VERSION__
}  // namespace tern::kernels
#endif
#endif
