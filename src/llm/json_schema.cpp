#include "llm/json_schema.h"

#include <algorithm>

#include "core/error.h"

namespace tern::llm {
namespace {

using json = nlohmann::json;

bool is_annotation(const std::string& k) {
  return k == "title" || k == "description" || k == "default" || k == "examples" || k == "format" || k == "$schema" || k == "$id" ||
         k == "$comment" || k == "$defs" || k == "definitions";
}

std::string place(const std::string& at) { return at.empty() ? "/" : at; }

uint8_t type_bit(const json& t, const std::string& at) {
  static const std::pair<const char*, uint8_t> kTypes[] = {{"object", JsonSchema::kObject},   {"array", JsonSchema::kArray},
                                                           {"string", JsonSchema::kString},   {"number", JsonSchema::kNumber},
                                                           {"integer", JsonSchema::kInteger}, {"boolean", JsonSchema::kBoolean},
                                                           {"null", JsonSchema::kNull}};
  if (t.is_string())
    for (const auto& [name, bit] : kTypes)
      if (t == name) return bit;
  fail("json_schema: 'type' at '", place(at), "' must be object, array, string, number, integer, boolean or null, not ", t.dump());
}

// The kind of value a literal is (its type bit).
uint8_t literal_type(const json& v) {
  if (v.is_string()) return JsonSchema::kString;
  if (v.is_boolean()) return JsonSchema::kBoolean;
  if (v.is_null()) return JsonSchema::kNull;
  if (v.is_number_integer()) return JsonSchema::kInteger | JsonSchema::kNumber;
  return JsonSchema::kNumber;
}

// The bytes a value of these types may begin with, as one bit per class: { [ " digit-or-minus t-or-f n.
uint8_t first_bytes(uint8_t types) {
  uint8_t b = 0;
  if (types & JsonSchema::kObject) b |= 1;
  if (types & JsonSchema::kArray) b |= 2;
  if (types & JsonSchema::kString) b |= 4;
  if (types & (JsonSchema::kNumber | JsonSchema::kInteger)) b |= 8;
  if (types & JsonSchema::kBoolean) b |= 16;
  if (types & JsonSchema::kNull) b |= 32;
  return b;
}

int64_t count_field(const json& v, const char* k, const std::string& at) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0) fail("json_schema: '", k, "' at '", place(at), "' must be a non-negative integer");
  return v.get<int64_t>();
}

}  // namespace

JsonSchema::JsonSchema(const json& schema) {
  root_ = &schema;
  json body = schema;
  if (schema.is_object() && schema.contains("x-guidance")) {
    read_x_guidance(schema["x-guidance"]);
    body.erase("x-guidance");
  }
  nodes_.emplace_back();  // kAnyNode
  // (the first node compiled is kRoot; `true`, which compiles to kAnyNode, makes none, and `false` is refused)
  if (compile(body, "", 0) != kRoot || !(nodes_[kRoot].types & (kObject | kArray)) || !nodes_[kRoot].literals.empty())
    fail("json_schema: the top level must be an object or an array (type: object or array), as response formats ask");
  nodes_[kRoot].types &= kObject | kArray;
  root_ = nullptr;
  refs_.clear();
  // The fewest bytes of each node's value: from "none" down to a fixed point, children (compiled after their
  // parents) first. A node's least value settles once its children's have, so as many passes as nodes reach it; a
  // node still at "none" has no finite value — a required property that recurses into itself. (Counted from below,
  // as before, such a schema was taken and its sequence ended empty.) min_bytes keeps them capped at 1 << 16, the
  // closing estimates' arithmetic.
  // (kHuge: finite, past what any count here reaches — sums and products stop there)
  constexpr int64_t kNone = int64_t{1} << 50, kHuge = int64_t{1} << 49, kMostValueBytes = int64_t{16} << 20;
  std::vector<int64_t> least(nodes_.size(), kNone);
  auto of = [&](int node) { return least[static_cast<size_t>(node)]; };
  auto add = [&](int64_t a, int64_t b) { return a >= kNone || b >= kNone ? kNone : std::min(kHuge, a + b); };
  for (size_t pass = 0; pass <= nodes_.size(); ++pass) {
    bool changed = false;
    for (size_t k = nodes_.size(); k-- > 0;) {
      const Node& n = nodes_[k];
      int64_t best = kNone;
      if (!n.literals.empty()) {
        for (const auto& l : n.literals) best = std::min<int64_t>(best, static_cast<int64_t>(l.size()));
      } else {
        if ((n.types & kObject) && !n.variants.empty()) {
          for (const Node::Variant& v : n.variants) best = std::min(best, of(v.node));
        } else if (n.types & kObject) {
          int64_t sum = 2;
          for (size_t i = 0; i < n.properties.size(); ++i)
            if (n.required >> i & 1) sum = add(sum, static_cast<int64_t>(n.properties[i].first.size()) + 4 + of(n.properties[i].second));
          best = std::min(best, sum);
        }
        if (n.types & kArray) {
          const int64_t item = add(of(n.items), 1);  // (an item and its comma)
          best = std::min(best, n.min_items == 0             ? 2
                                : item >= kNone              ? kNone
                                : n.min_items > kHuge / item ? kHuge
                                                             : add(2, n.min_items * item));
        }
        if (n.types & kString) best = std::min<int64_t>(best, 2);
        if (n.types & (kNumber | kInteger)) best = std::min<int64_t>(best, 1);
        if (n.types & (kBoolean | kNull)) best = std::min<int64_t>(best, 4);
      }
      if (best < least[k]) least[k] = best, changed = true;
    }
    if (!changed) break;
  }
  if (least[kRoot] >= kNone)
    fail(
        "json_schema: no finite value takes it (a required property recurses into itself, through $ref or items "
        "with minItems)");
  if (least[kRoot] > kMostValueBytes)
    fail("json_schema: its least value is ", least[kRoot], " bytes, more than an answer may hold (", kMostValueBytes, ")");
  for (size_t k = 0; k < nodes_.size(); ++k) nodes_[k].min_bytes = static_cast<int>(std::min<int64_t>(least[k], 1 << 16));
  // A union's branches: the bytes each still needs once its discriminating value is written.
  for (Node& n : nodes_) {
    if (n.variants.empty()) continue;
    const std::string& key = n.properties[0].first;
    const auto& literals = nodes_[static_cast<size_t>(n.properties[0].second)].literals;
    n.least_keys = 1 << 20;
    for (size_t i = 0; i < n.variants.size(); ++i) {
      Node::Variant& v = n.variants[i];
      const Node& b = nodes_[static_cast<size_t>(v.node)];
      v.extra = 0;
      for (size_t k = 0; k < b.properties.size(); ++k)
        if ((b.required >> k & 1) && k != v.key) v.extra += key_bytes(b, k);
      n.least_keys = std::min(n.least_keys, static_cast<int>(key.size() + 4 + literals[i].size()) + v.extra);
    }
  }
}

void JsonSchema::read_x_guidance(const json& options) {
  if (!options.is_object()) fail("json_schema: 'x-guidance' must be an object of llguidance's options");
  std::string key = ": ", item = ", ";
  bool flexible = true;
  for (const auto& [k, v] : options.items()) {
    if (k == "whitespace_flexible" && v.is_boolean()) flexible = v.get<bool>();
    else if ((k == "key_separator" || k == "item_separator") && v.is_string()) (k == "key_separator" ? key : item) = v.get<std::string>();
    else
      fail("json_schema: 'x-guidance' option '", k,
           "' is not supported (tern takes whitespace_flexible, key_separator and item_separator, as booleans and strings)");
  }
  if (flexible) return;
  // (a separator is its mark and then spaces: what tern's grammar can hold to)
  auto spaces_after = [](const std::string& sep, char mark, const char* name) {
    if (sep.empty() || sep[0] != mark || sep.find_first_not_of(' ', 1) != std::string::npos)
      fail("json_schema: x-guidance's ", name, " ", json(sep).dump(), " is not '", mark, "' followed by spaces");
    return static_cast<int>(sep.size() - 1);
  };
  key_spaces_ = spaces_after(key, ':', "key_separator");
  item_spaces_ = spaces_after(item, ',', "item_separator");
}

int JsonSchema::key_bytes(const Node& n, size_t i) const {
  return static_cast<int>(n.properties[i].first.size()) + 4 + nodes_[static_cast<size_t>(n.properties[i].second)].min_bytes;
}

int JsonSchema::resolve(const std::string& ref, const std::string& at, int depth) {
  for (const auto& [r, node] : refs_)
    if (r == ref) return node;
  std::string name;
  const json* defs = nullptr;
  for (const char* prefix : {"#/$defs/", "#/definitions/"})
    if (ref.rfind(prefix, 0) == 0) {
      name = ref.substr(std::string(prefix).size());
      const std::string key = std::string(prefix).substr(2, std::string(prefix).size() - 3);
      if (root_->is_object() && root_->contains(key)) defs = &(*root_)[key];
    }
  if (name.empty() || !defs || !defs->is_object() || !defs->contains(name))
    fail("json_schema: '$ref' at '", place(at), "' names ", ref, ": tern resolves #/$defs/NAME and #/definitions/NAME of the same schema");
  if (nodes_.size() >= kMostNodes) fail("json_schema: more than ", kMostNodes, " schemas");
  const int index = static_cast<int>(nodes_.size());
  nodes_.emplace_back();
  refs_.emplace_back(ref, index);  // (a reference to it from inside resolves here: recursion)
  const int body = compile((*defs)[name], ref.substr(1), depth + 1);
  nodes_[static_cast<size_t>(index)] = nodes_[static_cast<size_t>(body)];
  return index;
}

void JsonSchema::merge_any_of(Node& into, const json& branches, const std::string& at, int depth) {
  if (!branches.is_array() || branches.empty()) fail("json_schema: 'anyOf' at '", place(at), "' must be a non-empty list of schemas");
  uint8_t types = 0, seen_first = 0;
  bool any_literals = false;
  std::vector<int> nodes, objects;
  for (size_t i = 0; i < branches.size(); ++i) {
    const int b = compile(branches[i], at + "/anyOf/" + std::to_string(i), depth + 1);
    nodes.push_back(b);
    const Node& n = nodes_[static_cast<size_t>(b)];
    if (n.types == kAny && n.literals.empty()) {  // (a branch taking anything: the union takes anything)
      into = n;
      return;
    }
    // (integer and number both begin with a digit: together, number; objects alone are told apart by a key)
    uint8_t first = first_bytes(n.types);
    const bool object = n.types == kObject && n.literals.empty();
    if (object && !objects.empty()) first &= static_cast<uint8_t>(~1);
    if (object) objects.push_back(b);
    if (first & seen_first & ~8)
      fail("json_schema: 'anyOf' at '", place(at), "': branches ", i,
           " and an earlier one begin alike (tern decides a branch by the value's first byte, or objects by a key)");
    seen_first |= first;
    types |= n.types;
    any_literals |= !n.literals.empty();
  }
  into.types = types;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes_[static_cast<size_t>(nodes[i])];
    if (any_literals) {
      if (!n.literals.empty()) into.literals.insert(into.literals.end(), n.literals.begin(), n.literals.end());
      else if (n.types == kNull) into.literals.push_back("null");
      else if (n.types == kBoolean) into.literals.insert(into.literals.end(), {"true", "false"});
      else
        fail("json_schema: 'anyOf' at '", place(at), "' mixes an enum with a branch of other values (only null or boolean may join one)");
    }
    if (n.types & kObject) into.properties = n.properties, into.required = n.required, into.additional = n.additional;
    if (n.types & kArray) into.items = n.items, into.min_items = n.min_items, into.max_items = n.max_items;
  }
  if (into.literals.size() > kMostLiterals) fail("json_schema: 'anyOf' at '", place(at), "' has more than ", kMostLiterals, " literals");
  if (objects.size() > 1) merge_objects(into, objects, at);
}

void JsonSchema::merge_objects(Node& into, const std::vector<int>& objects, const std::string& at) {
  const Node& first = nodes_[static_cast<size_t>(objects[0])];
  for (const auto& property : first.properties) {
    const std::string& key = property.first;
    Node values;  // the key's values over every branch, each literal picking its branch
    values.types = 0;
    std::vector<Node::Variant> variants;
    bool tells = true;
    for (int o : objects) {
      const Node& n = nodes_[static_cast<size_t>(o)];
      const auto it = std::find_if(n.properties.begin(), n.properties.end(), [&](const auto& p) { return p.first == key; });
      const auto k = static_cast<size_t>(it - n.properties.begin());
      if (it == n.properties.end() || !(n.required >> k & 1) || nodes_[static_cast<size_t>(it->second)].literals.empty()) {
        tells = false;
        break;
      }
      const Node& v = nodes_[static_cast<size_t>(it->second)];
      for (const std::string& l : v.literals) {
        if (std::find(values.literals.begin(), values.literals.end(), l) != values.literals.end()) tells = false;
        values.literals.push_back(l);
        variants.push_back({o, static_cast<uint8_t>(k), 0});
      }
      values.types |= v.types;
    }
    if (!tells) continue;
    if (values.literals.size() > kMostLiterals)
      fail("json_schema: 'anyOf' at '", place(at), "': its objects' '", key, "' has more than ", kMostLiterals, " values");
    if (nodes_.size() >= kMostNodes) fail("json_schema: more than ", kMostNodes, " schemas");
    into.properties = {{key, static_cast<int>(nodes_.size())}};
    into.required = 1, into.additional = false;
    into.variants = std::move(variants);
    nodes_.push_back(std::move(values));  // (`first` is not read after this)
    return;
  }
  fail("json_schema: 'anyOf' at '", place(at),
       "' holds objects with no required key whose const or enum values tell them apart (tern picks an object's branch "
       "by such a key, written first: a tool call's name)");
}

int JsonSchema::compile(const json& s, const std::string& at, int depth) {
  if (depth > 64) fail("json_schema: nested deeper than 64 at '", place(at), "'");
  if (nodes_.size() >= kMostNodes) fail("json_schema: more than ", kMostNodes, " schemas");
  if (s.is_boolean()) {
    if (s.get<bool>()) return kAnyNode;
    fail("json_schema: false at '", place(at), "' allows no value");
  }
  if (!s.is_object()) fail("json_schema: '", place(at), "' must be a schema (an object), not ", s.type_name());
  if (s.contains("$ref")) {
    for (const auto& [k, v] : s.items())
      if (k != "$ref" && !is_annotation(k)) fail("json_schema: '", k, "' beside '$ref' at '", place(at), "' is not supported");
    if (!s["$ref"].is_string()) fail("json_schema: '$ref' at '", place(at), "' must be a string");
    return resolve(s["$ref"].get<std::string>(), at, depth);
  }
  const int index = static_cast<int>(nodes_.size());
  nodes_.emplace_back();
  Node n;
  bool typed = false, object_words = false, array_words = false;
  for (const auto& [k, v] : s.items()) {
    const std::string here = at + "/" + k;
    if (is_annotation(k)) continue;
    if (k == "type") {
      typed = true;
      n.types = 0;
      if (v.is_array()) {
        for (const auto& t : v) n.types |= type_bit(t, at);
        if (n.types == 0) fail("json_schema: 'type' at '", place(at), "' is an empty list");
      } else {
        n.types = type_bit(v, at);
      }
    } else if (k == "properties") {
      object_words = true;
      if (!v.is_object()) fail("json_schema: 'properties' at '", place(at), "' must be an object");
      if (v.size() > kMostProperties) fail("json_schema: '", place(at), "' has more than ", kMostProperties, " properties");
      for (const auto& [name, sub] : v.items()) {
        for (unsigned char c : name)
          if (c < 0x20 || c == '"' || c == '\\')
            fail("json_schema: property name ", json(name).dump(), " at '", place(at), "' holds a quote, backslash or control character");
        const int child = compile(sub, here + "/" + name, depth + 1);
        n.properties.emplace_back(name, child);
      }
    } else if (k == "required" || k == "additionalProperties") {
      object_words = true;
    } else if (k == "items") {
      array_words = true;
      if (!v.is_object() && !v.is_boolean())
        fail("json_schema: 'items' at '", place(at), "' must be one schema (tuples are not supported)");
      n.items = compile(v, here, depth + 1);
    } else if (k == "minItems" || k == "maxItems") {
      array_words = true;
      (k == "minItems" ? n.min_items : n.max_items) = count_field(v, k.c_str(), at);
    } else if (k == "enum" || k == "const") {
      const json values = k == "const" ? json::array({v}) : v;
      if (!values.is_array() || values.empty()) fail("json_schema: 'enum' at '", place(at), "' must be a non-empty list");
      if (values.size() > kMostLiterals) fail("json_schema: 'enum' at '", place(at), "' has more than ", kMostLiterals, " values");
      uint8_t kinds = 0;
      for (const auto& e : values) {
        if (e.is_object() || e.is_array())
          fail("json_schema: '", k, "' at '", place(at), "' holds an object or array (only scalars are supported)");
        n.literals.push_back(e.dump());
        kinds |= literal_type(e);
      }
      if (!typed) n.types = kinds;
      else n.types &= kinds;
    } else if (k == "anyOf") {
      merge_any_of(n, v, at, depth);
      typed = true;
    } else {
      fail("json_schema: keyword '", k, "' at '", place(at),
           "' is not supported (tern constrains type, properties, required, additionalProperties, items, minItems, maxItems, enum, "
           "const, anyOf and $ref)");
    }
  }
  if (s.contains("required")) {
    const json& r = s["required"];
    if (!r.is_array()) fail("json_schema: 'required' at '", place(at), "' must be a list of names");
    for (const auto& name : r) {
      if (!name.is_string()) fail("json_schema: 'required' at '", place(at), "' holds ", name.dump(), ", not a name");
      auto it = std::find_if(n.properties.begin(), n.properties.end(), [&](const auto& p) { return p.first == name.get<std::string>(); });
      if (it == n.properties.end()) {  // (required but not described: any value)
        if (n.properties.size() >= kMostProperties) fail("json_schema: '", place(at), "' has more than ", kMostProperties, " properties");
        n.properties.emplace_back(name.get<std::string>(), kAnyNode);
        it = n.properties.end() - 1;
      }
      n.required |= uint64_t{1} << (it - n.properties.begin());
    }
  }
  if (s.contains("additionalProperties")) {
    const json& a = s["additionalProperties"];
    if (a.is_boolean()) n.additional = a.get<bool>();
    else if (!(a.is_object() && a.empty())) fail("json_schema: 'additionalProperties' at '", place(at), "' must be true or false");
  }
  if (!typed && n.literals.empty()) n.types = object_words ? kObject : array_words ? kArray : kAny;
  if (n.min_items > n.max_items) fail("json_schema: minItems is more than maxItems at '", place(at), "'");
  if (n.types == 0) fail("json_schema: '", place(at), "' allows no value (its type and enum share none)");
  nodes_[static_cast<size_t>(index)] = std::move(n);
  return index;
}

}  // namespace tern::llm
