// The merge loop both tokenizers share (Hugging Face BPE by merge rank, llama2.c by piece score): join the
// adjacent pair with the best priority — the leftmost of equal ones — until no pair merges. A heap of candidate
// pairs over a linked list of symbols makes it O(n log n) in the symbols; the scan-every-pair loop it replaces
// was quadratic (issue 51: one 40,000-character word took 15.2 s where llama-tokenize takes 0.25 s).
#pragma once
#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

#include "llm/tokenizer.h"

namespace tern::llm {

struct PairMerge {
  double priority;  // lower merges first (a rank; a negated score)
  int64_t id;       // the token the pair becomes
};

struct MergedSymbol {
  int64_t id;           // its token (−1: a symbol that never merged and has none)
  size_t first, count;  // the input symbols it covers
};

// `lookup(left_id, right_id)` gives the pair's merge or nullopt; symbols with id < 0 never merge. `cancelled`
// (may be empty) is asked every 1,024 merges and ends the loop with EncodeCancelled.
template <class Lookup>
std::vector<MergedSymbol> merge_pairs(const std::vector<int64_t>& ids, const Lookup& lookup, const CancelCheck& cancelled) {
  struct Symbol {
    int64_t id;
    size_t count;    // input symbols covered (0: merged into its left neighbour)
    int prev, next;  // neighbours (−1: none)
  };
  const int n = static_cast<int>(ids.size());
  std::vector<Symbol> sym(ids.size());
  for (int i = 0; i < n; ++i) sym[static_cast<size_t>(i)] = {ids[static_cast<size_t>(i)], 1, i - 1, i + 1 < n ? i + 1 : -1};
  struct Candidate {
    double priority;
    int left;
    int64_t left_id, right_id, id;
    bool operator>(const Candidate& o) const { return priority != o.priority ? priority > o.priority : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int left) {
    if (left < 0 || sym[static_cast<size_t>(left)].next < 0) return;
    const Symbol &a = sym[static_cast<size_t>(left)], &b = sym[static_cast<size_t>(a.next)];
    if (a.id < 0 || b.id < 0) return;
    if (const std::optional<PairMerge> m = lookup(a.id, b.id)) heap.push({m->priority, left, a.id, b.id, m->id});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  for (size_t merges = 0; !heap.empty();) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& a = sym[static_cast<size_t>(c.left)];
    if (a.count == 0 || a.next < 0 || a.id != c.left_id || sym[static_cast<size_t>(a.next)].id != c.right_id) continue;  // stale
    if (++merges % 1024 == 0 && cancelled && cancelled()) throw EncodeCancelled("encoding was cancelled");
    Symbol& b = sym[static_cast<size_t>(a.next)];
    a.id = c.id;
    a.count += b.count;
    a.next = b.next;
    b.count = 0;
    if (a.next >= 0) sym[static_cast<size_t>(a.next)].prev = c.left;
    consider(a.prev);
    consider(c.left);
  }
  std::vector<MergedSymbol> out;
  for (size_t i = 0; i < sym.size(); i += sym[i].count) out.push_back({sym[i].id, i, sym[i].count});
  return out;
}

}  // namespace tern::llm
