#include "core/json.h"

#include "core/mapped_file.h"
#include "core/tensor.h"

namespace tern {

namespace {

// nlohmann's SAX interface: counts what a parse would build, and how deep it nests, keeping nothing.
struct JsonParseCost {
  size_t bytes = 0;
  int depth = 0;
  bool too_deep = false;
  bool value() {
    bytes += 64;
    return true;
  }
  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(int64_t) { return value(); }
  bool number_unsigned(uint64_t) { return value(); }
  bool number_float(double, const std::string&) { return value(); }
  bool string(std::string& s) {
    bytes += s.size();
    return value();
  }
  bool binary(nlohmann::json::binary_t& b) {
    bytes += b.size();
    return value();
  }
  bool open() {
    if (++depth > kMaxJsonDepth) return !(too_deep = true);  // stops the pass here
    return value();
  }
  bool start_object(size_t) { return open(); }
  bool key(std::string& k) {
    bytes += 96 + k.size();
    return true;
  }
  bool end_object() { return --depth, true; }
  bool start_array(size_t) { return open(); }
  bool end_array() { return --depth, true; }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

}  // namespace

bool is_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : (c >> 4) == 0xE ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return false;
    i += n;
  }
  return true;
}

namespace {

// nlohmann's parse errors end "last read: '<the token so far>'" — the whole of an 8 MB bad token, which tern
// serve echoed back to the client (issue 79). At most 64 bytes of it are kept (cut on a UTF-8 boundary).
std::string with_short_excerpt(const std::string& message) {
  constexpr size_t kExcerpt = 64;
  const std::string mark = "last read: '";
  const size_t at = message.find(mark);
  if (at == std::string::npos || message.size() - at - mark.size() <= kExcerpt + 1) return message;
  size_t cut = at + mark.size() + kExcerpt;
  while (cut > at + mark.size() && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  return message.substr(0, cut) + "…' (" + std::to_string(message.size() - at - mark.size() - 1) + " bytes)";
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& what, const nlohmann::json::parser_callback_t& keep) {
  JsonParseCost cost;
  const bool parsed = nlohmann::json::sax_parse(text.begin(), text.end(), &cost);
  if (cost.too_deep) fail(what, ": its JSON nests deeper than ", kMaxJsonDepth, " levels");
  if (parsed)
    check_host_bytes(
        cost.bytes, detail::concat(what, ": parsing its ", text.size(), " bytes of JSON would need about ", cost.bytes / 1000000, " MB: "));
  try {
    return nlohmann::json::parse(text.begin(), text.end(), keep);
  } catch (const nlohmann::json::exception& e) {
    fail(what, " is not valid JSON: ", with_short_excerpt(e.what()));
  }
}

nlohmann::json read_json_file(const std::string& path, const nlohmann::json::parser_callback_t& keep) {
  const auto file = map_file(path);  // (mapped, not read into memory: the file may be anything)
  return parse_json(std::string_view(static_cast<const char*>(file->data), file->size), "'" + path + "'", keep);
}

}  // namespace tern
