// What a fusion pass reports: one rewrite it made. Each pass matches exactly or leaves the graph alone.
#pragma once
#include <string>

namespace tern {

// One rewrite a fusion pass made: which pattern, and the node it produced.
struct Fusion {
  std::string pattern;
  std::string node;
};

}  // namespace tern
