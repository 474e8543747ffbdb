// A JSON Schema compiled for constrained decoding (an API's response_format {"type": "json_schema"}): the subset
// structured-output APIs use, as a graph of nodes JsonGrammar walks while it reads a value byte by byte.
//
// Supported: type (one or a list: object, array, string, number, integer, boolean, null), properties, required,
// additionalProperties (true, the default: other keys with any value; false: none), items, minItems, maxItems,
// enum and const (scalars), anyOf of such schemas when its branches begin with different bytes (a type union such
// as Pydantic's Optional) or are objects told apart by one key (below), $ref to #/$defs/NAME or #/definitions/NAME
// (recursion included: nesting is bounded by JsonGrammar::kMaxDepth), and the annotations title, description,
// default, examples, format, $schema, $id, and at the top llguidance's x-guidance whitespace options. Anything else that constrains a value
// (pattern, minLength, minimum, oneOf, allOf, …) is refused when compiled, naming the keyword and where it is — never silently ignored. The
// top level must be an object or an array (genai's tool-call guidance asks for an array of calls), and some finite
// value must take it, of at most 16 MiB (a required property recursing into itself is refused).
//
// anyOf over objects (a union of tool calls: {"name": {"const": "get_weather"}, "arguments": {...}} per tool) is a
// discriminated union: the branches must share a required key whose const/enum values tell them apart, the first
// such key in the first branch's order. The object must begin with that key (the order every tool-call format
// writes): its value picks the branch, and the rest of the object is that branch's.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace tern::llm {

class JsonSchema {
 public:
  // Type bits: which kinds of value a node takes.
  enum : uint8_t { kObject = 1, kArray = 2, kString = 4, kNumber = 8, kInteger = 16, kBoolean = 32, kNull = 64, kAny = 127 };
  static constexpr size_t kMostProperties = 64, kMostLiterals = 64, kMostNodes = 4096;
  struct Node {
    uint8_t types = kAny;
    std::vector<std::string> literals;                    // enum/const: each value's compact JSON text; empty: any
    std::vector<std::pair<std::string, int>> properties;  // key as written (no escapes), its value's node
    uint64_t required = 0;                                // bit i: properties[i] must appear
    bool additional = true;                               // keys besides properties (their values: node 0, any)
    int items = 0;                                        // an array's items' node
    int64_t min_items = 0, max_items = INT64_MAX;
    int min_bytes = 1;  // the fewest bytes a value of this node takes (closing a text in time)
    // A discriminated union of objects: properties holds only the key that tells the branches apart, its value's
    // node the literals of all branches; variants[i] is the branch literal i of that node picks.
    struct Variant {
      int node = 0;
      uint8_t key = 0;  // the key's place in the branch's properties
      int extra = 0;    // the bytes of the branch's other required keys at their least: ,"name":value each
    };
    std::vector<Variant> variants;
    int least_keys = 0;  // a union's fewest bytes of required keys (its discriminator's included), over branches
  };

  // Compiles `schema`; fails (tern::Error) naming the keyword and its place ("/properties/age") when it is outside
  // the subset above or malformed.
  explicit JsonSchema(const nlohmann::json& schema);
  const Node& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  static constexpr int kAnyNode = 0, kRoot = 1;
  // The top level's x-guidance {"whitespace_flexible": false, "key_separator": ": ", "item_separator": ", "}: the
  // spaces after ':' and after ',' — then the only whitespace allowed; -1: any whitespace, as JSON allows.
  int key_spaces() const { return key_spaces_; }
  int item_spaces() const { return item_spaces_; }

 private:
  int compile(const nlohmann::json& s, const std::string& at, int depth);
  int resolve(const std::string& ref, const std::string& at, int depth);
  void merge_any_of(Node& into, const nlohmann::json& branches, const std::string& at, int depth);
  void merge_objects(Node& into, const std::vector<int>& objects, const std::string& at);
  int key_bytes(const Node& n, size_t i) const;    // ,"name":value at its least
  const nlohmann::json* root_ = nullptr;           // (while compiling: where $refs resolve)
  std::vector<std::pair<std::string, int>> refs_;  // $ref → its node, compiled once (recursion ends here)
  void read_x_guidance(const nlohmann::json& options);
  std::vector<Node> nodes_;
  int key_spaces_ = -1, item_spaces_ = -1;
};

}  // namespace tern::llm
