#include "graph/onnx_loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>
#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/json.h"
#include "core/mapped_file.h"
#include "core/tensor.h"
#include "graph/onnx_wire.h"
#include "graph/raw_data_in_place.h"

namespace tern {
namespace fs = std::filesystem;

namespace {

// What parsing a protobuf allocates, read from its wire format before anything is parsed. A file's size
// bounds nothing: an empty NodeProto is 2 bytes on disk, and a 20 MB model.onnx of 10 M of them took 5.75 GB
// of RSS in `tern inspect` (575 bytes a node: protobuf's message, then our IR's Node), so a 100 MB one would
// have been an OOM kill. Costs per item, from that measurement and rounded up: a message 600 bytes; a string
// or bytes field its length plus 300 (a name becomes an IR value too); a number 8; packed floats as stored.
// The same walk finds the first string field (names, op types, domains) that is not UTF-8 — protobuf's proto2
// parse does not check — since names end up in JSON (pack headers, profiles, replies), which must be UTF-8.
struct OnnxParseCost {
  size_t messages = 0, bytes = 0;
  const uint8_t* begin = nullptr;  // the file's first byte, for offsets
  const onnx_wire::Message* not_utf8_in = nullptr;
  const onnx_wire::Field* not_utf8 = nullptr;
  size_t not_utf8_at = 0;
};

// Walks one message of type `type` (onnx_wire's schema); false on anything protobuf's own parse will refuse
// (it then names it).
bool add_parse_cost(const onnx_wire::Message& type, const uint8_t* p, const uint8_t* end, int depth, OnnxParseCost& cost) {
  using onnx_wire::Kind;
  if (depth > 100) return false;  // protobuf's own recursion limit
  cost.messages += 1;
  cost.bytes += 600;
  while (p < end) {
    uint64_t tag = 0, len = 0;
    if (!onnx_wire::read_varint(p, end, tag)) return false;
    switch (tag & 7) {
      case 0:
        if (!onnx_wire::read_varint(p, end, len)) return false;
        cost.bytes += 8;
        break;
      case 1:
        if (end - p < 8) return false;
        p += 8;
        cost.bytes += 8;
        break;
      case 5:
        if (end - p < 4) return false;
        p += 4;
        cost.bytes += 8;
        break;
      case 2: {
        if (!onnx_wire::read_varint(p, end, len) || len > static_cast<uint64_t>(end - p)) return false;
        const onnx_wire::Field* field = tag >> 3 <= INT_MAX ? type.find(static_cast<int>(tag >> 3)) : nullptr;
        const Kind kind = field ? field->kind : Kind::Bytes;
        if (kind == Kind::Message) {
          if (!add_parse_cost(onnx_wire::messages()[static_cast<size_t>(field->message)], p, p + len, depth + 1, cost)) return false;
        } else if (kind == Kind::PackedFixed) {
          cost.bytes += len;
        } else if (kind == Kind::PackedVarint) {
          cost.bytes += 8 * len;
        } else {
          cost.bytes += len + 300;
          if (kind == Kind::String && !cost.not_utf8 && !is_utf8({reinterpret_cast<const char*>(p), static_cast<size_t>(len)})) {
            cost.not_utf8_in = &type;
            cost.not_utf8 = field;
            cost.not_utf8_at = static_cast<size_t>(p - cost.begin);
          }
        }
        p += len;
        break;
      }
      default: return false;  // groups: not in ONNX
    }
  }
  return true;
}

// Parses `data` into `msg`. With `in_place`, large raw_data stay in `data` (raw_data_in_place.h): returns whether
// any did, i.e. whether msg's tensors hold tokens for bytes in `data`.
template <typename Msg>
bool parse_message(Msg& msg, int wire_type, const void* data, size_t size, const std::string& path, const char* what,
                   bool in_place = false) {
  if (size > static_cast<size_t>(INT_MAX))
    fail("'", path, "' is ", size, " bytes; a protobuf message cannot exceed 2 GB (keep weights as external data)");
  OnnxParseCost cost;
  const auto* bytes = static_cast<const uint8_t*>(data);
  cost.begin = bytes;
  add_parse_cost(onnx_wire::messages()[static_cast<size_t>(wire_type)], bytes, bytes + size, 0, cost);
  check_host_bytes(cost.bytes, detail::concat("'", path, "' holds ", cost.messages, " protobuf messages in ", size,
                                              " bytes; parsing it would need about ", cost.bytes / 1000000, " MB: "));
  std::optional<std::string> slim;
  if (in_place) slim = raw_data_in_place::slim_message({bytes, size}, wire_type);
  google::protobuf::io::ArrayInputStream raw(slim ? slim->data() : data, static_cast<int>(slim ? slim->size() : size));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(INT_MAX);
  if (!msg.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    fail("'", path, "' is not a valid ", what, " (truncated or corrupt protobuf)");
  if (cost.not_utf8)
    fail("'", path, "': the string ", cost.not_utf8_in->name, ".", cost.not_utf8->name, " at byte ", cost.not_utf8_at, " is not UTF-8");
  return slim.has_value();
}

// Resolves `location` fields of external tensors, refusing anything outside the model folder; and, when the
// model's own tensors are read in place, the model file whose bytes their tokens name.
class ExternalData {
 public:
  explicit ExternalData(std::string dir, std::shared_ptr<MappedFile> model_file = nullptr, bool misaligned_views = false)
      : dir_(std::move(dir)), model_file_(std::move(model_file)), misaligned_views_(misaligned_views) {}
  const std::shared_ptr<MappedFile>& model_file() const { return model_file_; }
  bool misaligned_views() const { return misaligned_views_; }

  std::shared_ptr<MappedFile> open(const std::string& location, const std::string& tensor) {
    if (location.empty()) fail("tensor '", tensor, "': external data has no location");
    auto it = files_.find(location);
    if (it != files_.end()) return it->second;
    std::string real;
    try {
      real = confined_file(dir_, location, "external data");
    } catch (const Error&) {
      rethrow_prefixed("tensor '" + tensor + "': ");
    }
    auto m = map_file(real);
    files_.emplace(location, m);
    return m;
  }
  // The files tensors view: the external data, and the model file when its raw_data stayed in place.
  std::vector<std::shared_ptr<MappedFile>> mappings() const {
    std::vector<std::shared_ptr<MappedFile>> out;
    if (model_file_) out.push_back(model_file_);
    for (const auto& [location, file] : files_) out.push_back(file);
    return out;
  }
  std::vector<std::string> paths() const {
    std::vector<std::string> out;
    for (const auto& [location, file] : files_) out.push_back((fs::path(dir_.empty() ? "." : dir_) / location).string());
    return out;
  }

 private:
  std::string dir_;
  std::shared_ptr<MappedFile> model_file_;
  bool misaligned_views_;
  std::map<std::string, std::shared_ptr<MappedFile>> files_;
};

// A tensor of bytes inside a mapping: a view when they are aligned for their type (or large and `ext` asks for
// misaligned views), else a copy, after which the file's pages under them leave the process (nothing reads them
// there again).
Tensor tensor_in_file(const std::shared_ptr<MappedFile>& file, char* at, DType dt, const Shape& shape, size_t nbytes,
                      const ExternalData& ext) {
  if (reinterpret_cast<uintptr_t>(at) % std::max<size_t>(dtype_size(dt), 1) == 0 ||
      (ext.misaligned_views() && nbytes >= kMisalignedViewBytes))
    return Tensor(dt, shape, mapped_view(file, at, nbytes));
  Tensor t(dt, shape);
  std::memcpy(t.raw(), at, nbytes);
  drop_mapped_pages(at, nbytes);
  return t;
}

DType dtype_from_onnx(int32_t t, const std::string& what) {
  switch (t) {
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 9:
    case 10:
    case 11:
    case 12:
    case 13:
    case 16:
    case 21:
    case 22: return static_cast<DType>(t);
    case 8: fail_unsupported(what, ": string tensors are not supported");
    default: fail_unsupported(what, ": data type ", t, " is not supported");
  }
}

template <typename Field>
void check_count(const Field& f, int64_t expected, const std::string& name) {
  if (static_cast<int64_t>(f.size()) != expected) fail("tensor '", name, "': has ", f.size(), " values, its shape needs ", expected);
}

Tensor tensor_from_proto(const onnx::TensorProto& p, ExternalData* ext) {
  const std::string name = p.name().empty() ? "<unnamed>" : p.name();
  DType dt = dtype_from_onnx(p.data_type(), "tensor '" + name + "'");
  Shape shape;
  int64_t numel = 1;
  for (int64_t d : p.dims()) {
    if (d < 0) fail("tensor '", name, "': negative dimension ", d);
    if (d > 0 && numel > (INT64_MAX / 16) / d) fail("tensor '", name, "': shape is too large");
    numel *= d;
    shape.push_back(d);
  }
  const size_t nbytes = bytes_for(dt, numel);

  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    if (!ext) fail("tensor '", name, "': external data is not allowed here");
    std::string location;
    int64_t offset = 0, length = -1;
    // A byte count as the spec writes it: decimal digits only (no sign, no spaces), fitting 63 bits.
    auto byte_count = [&](const std::string& key, const std::string& text) {
      int64_t v = 0;
      bool ok = !text.empty() && text.size() <= 18;
      for (char c : text) ok = ok && c >= '0' && c <= '9';
      if (ok) v = std::stoll(text);
      else fail("tensor '", name, "': external data ", key, " '", text, "' is not a byte count");
      return v;
    };
    for (const auto& kv : p.external_data()) {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = byte_count("offset", kv.value());
      else if (kv.key() == "length") length = byte_count("length", kv.value());
    }
    auto file = ext->open(location, name);
    if (offset < 0 || static_cast<size_t>(offset) > file->size)
      fail("tensor '", name, "': offset ", offset, " is past the end of '", location, "' (", file->size, " bytes)");
    if (length < 0) length = static_cast<int64_t>(nbytes);
    if (static_cast<size_t>(length) != nbytes)
      fail("tensor '", name, "': external length ", length, " bytes, its shape ", shape_str(shape), " of ", dtype_name(dt), " needs ",
           nbytes);
    if (static_cast<size_t>(offset) + nbytes > file->size)
      fail("tensor '", name, "': bytes ", offset, "..", offset + length, " are past the end of '", location, "' (", file->size,
           " bytes; file truncated?)");
    return tensor_in_file(file, static_cast<char*>(file->data) + offset, dt, shape, nbytes, *ext);
  }

  // The data's size is checked against the shape before anything is allocated: the shape is only a claim,
  // the bytes in the file are what is there.
  if (p.has_raw_data()) {
    const bool in_file = ext && ext->model_file() && p.raw_data().size() == raw_data_in_place::kTokenBytes;
    const raw_data_in_place::FileSpan span =
        in_file ? raw_data_in_place::read_token(p.raw_data()) : raw_data_in_place::FileSpan{0, p.raw_data().size()};
    if (span.length != nbytes)
      fail("tensor '", name, "': raw_data has ", span.length, " bytes, shape ", shape_str(shape), " of ", dtype_name(dt), " needs ",
           nbytes);
    if (in_file)
      return tensor_in_file(ext->model_file(), static_cast<char*>(ext->model_file()->data) + span.offset, dt, shape, nbytes, *ext);
    Tensor t(dt, shape);
    if (nbytes) std::memcpy(t.raw(), p.raw_data().data(), nbytes);
    return t;
  }
  if (numel == 0) return Tensor(dt, shape);
  switch (dt) {
    case DType::Float32: check_count(p.float_data(), numel, name); break;
    case DType::Float64: check_count(p.double_data(), numel, name); break;
    case DType::Int64: check_count(p.int64_data(), numel, name); break;
    case DType::UInt32:
    case DType::UInt64: check_count(p.uint64_data(), numel, name); break;
    case DType::Int4:
    case DType::UInt4: check_count(p.int32_data(), static_cast<int64_t>(nbytes), name); break;
    default: check_count(p.int32_data(), numel, name);
  }
  Tensor t(dt, shape);
  char* out = static_cast<char*>(t.raw());
  switch (dt) {
    case DType::Float32: std::memcpy(out, p.float_data().data(), nbytes); break;
    case DType::Float64: std::memcpy(out, p.double_data().data(), nbytes); break;
    case DType::Int64: std::memcpy(out, p.int64_data().data(), nbytes); break;
    case DType::UInt32:
    case DType::UInt64:
      for (int64_t i = 0; i < numel; ++i) {
        if (dt == DType::UInt32) reinterpret_cast<uint32_t*>(out)[i] = static_cast<uint32_t>(p.uint64_data(i));
        else reinterpret_cast<uint64_t*>(out)[i] = p.uint64_data(i);
      }
      break;
    case DType::Int4:
    case DType::UInt4:  // int32_data holds the packed bytes, two 4-bit values each.
      for (size_t i = 0; i < nbytes; ++i) out[i] = static_cast<char>(p.int32_data(static_cast<int>(i)));
      break;
    default: {
      // int8/uint8/int16/uint16/bool/int32/float16/bfloat16 all travel in int32_data.
      size_t es = dtype_size(dt);
      for (int64_t i = 0; i < numel; ++i) {
        int32_t v = p.int32_data(static_cast<int>(i));
        std::memcpy(out + static_cast<size_t>(i) * es, &v, es);  // little-endian: low bytes first
      }
    }
  }
  return t;
}

std::optional<SymShape> shape_from_type(const onnx::TypeProto& type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return std::nullopt;
  SymShape s;
  for (const auto& d : type.tensor_type().shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) s.push_back(Dim::known(d.dim_value()));
    else s.push_back(Dim::named(d.dim_param()));
  }
  return s;
}

// Records a graph input/output/value type. Types tern cannot hold are noted on the value; the session
// reports them after the op check, so users see every missing op first.
void read_value_info(Graph& g, const onnx::ValueInfoProto& vi, const char* role) {
  int id = g.add_value(vi.name());
  Value& v = g.values[static_cast<size_t>(id)];
  const auto& type = vi.type();
  const std::string what = std::string("graph ") + role + " '" + vi.name() + "'";
  if (type.value_case() == onnx::TypeProto::VALUE_NOT_SET) return;  // type left for inference
  if (!type.has_tensor_type()) {
    v.unsupported = what + " is not a tensor (sequence/map/optional types are not supported)";
    return;
  }
  if (type.tensor_type().elem_type() != 0) {
    try {
      v.dtype = dtype_from_onnx(type.tensor_type().elem_type(), what);
    } catch (const UnsupportedError& e) {
      v.unsupported = e.what();
    }
  }
  v.shape = shape_from_type(type);
}

// Subgraphs (If/Loop/Scan bodies) nest at most this deep: real exports nest one or two; a hostile file
// nesting thousands would otherwise recurse through every pass.
constexpr int kMaxSubgraphDepth = 16;

std::shared_ptr<Graph> graph_from_proto(const onnx::GraphProto& gp, const std::map<std::string, int>& opsets, ExternalData* ext, int depth);

Attribute attribute_from_proto(const onnx::AttributeProto& a, const std::map<std::string, int>& opsets, ExternalData* ext, int depth) {
  Attribute r;
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::FLOAT:
      r.kind = Attribute::Kind::Float;
      r.f = a.f();
      break;
    case A::INT:
      r.kind = Attribute::Kind::Int;
      r.i = a.i();
      break;
    case A::STRING:
      r.kind = Attribute::Kind::String;
      r.s = a.s();
      break;
    case A::TENSOR:
      r.kind = Attribute::Kind::Tensor;
      try {
        r.t = tensor_from_proto(a.t(), ext);
      } catch (const UnsupportedError& e) {  // only an error if an op reads it (Node::attr)
        r.unsupported = std::string("attribute '") + a.name() + "': " + e.what();
      }
      break;
    case A::GRAPH:
      r.kind = Attribute::Kind::Graph;
      r.g = graph_from_proto(a.g(), opsets, ext, depth + 1);
      break;
    case A::FLOATS:
      r.kind = Attribute::Kind::Floats;
      r.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case A::INTS:
      r.kind = Attribute::Kind::Ints;
      r.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case A::STRINGS:
      r.kind = Attribute::Kind::Strings;
      r.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case A::TENSORS:
      r.kind = Attribute::Kind::Tensors;
      for (const auto& t : a.tensors()) r.tensors.push_back(tensor_from_proto(t, ext));
      break;
    case A::GRAPHS:
      r.kind = Attribute::Kind::Graphs;
      for (const auto& sg : a.graphs()) r.graphs.push_back(graph_from_proto(sg, opsets, ext, depth + 1));
      break;
    case A::TYPE_PROTO:
    case A::TYPE_PROTOS: r.kind = Attribute::Kind::TypeProto; break;
    case A::SPARSE_TENSOR:
    case A::SPARSE_TENSORS: fail_unsupported("attribute '", a.name(), "': sparse tensors are not supported");
    default: fail("attribute '", a.name(), "' has unknown type ", static_cast<int>(a.type()));
  }
  return r;
}

std::shared_ptr<Graph> graph_from_proto(const onnx::GraphProto& gp, const std::map<std::string, int>& opsets, ExternalData* ext,
                                        int depth) {
  if (depth > kMaxSubgraphDepth) fail("graph '", gp.name(), "': subgraphs nest deeper than ", kMaxSubgraphDepth, " levels");
  const bool is_subgraph = depth > 0;
  auto g = std::make_shared<Graph>();
  g->name = gp.name();
  g->opsets = opsets;
  if (gp.sparse_initializer_size() > 0) fail_unsupported("graph '", gp.name(), "': sparse initializers are not supported");
  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) fail("graph '", gp.name(), "': an initializer has no name");
    int id = g->add_value(init.name());
    Value& v = g->values[static_cast<size_t>(id)];
    v.constant = tensor_from_proto(init, ext);
    v.dtype = v.constant->dtype();
    v.shape = sym_shape(v.constant->shape());
  }
  for (const auto& in : gp.input()) {
    int id = g->find_value(in.name());
    if (id >= 0 && g->values[static_cast<size_t>(id)].constant) continue;  // old-IR initializer listed as input
    read_value_info(*g, in, "input");
    g->inputs.push_back(g->find_value(in.name()));
  }
  for (const auto& vi : gp.value_info()) read_value_info(*g, vi, "value");

  for (int ni = 0; ni < gp.node_size(); ++ni) {
    const auto& np = gp.node(ni);
    if (np.op_type().empty()) fail("graph '", gp.name(), "': node #", ni, " ('", np.name(), "') has no op_type");
    Node n;
    n.op_type = np.op_type();
    n.domain = (np.domain() == "ai.onnx") ? "" : np.domain();
    n.name = np.name().empty() ? n.op_type + "_" + std::to_string(ni) : np.name();
    auto os = opsets.find(n.domain);
    n.opset = os == opsets.end() ? 1 : os->second;
    for (const auto& in : np.input()) n.inputs.push_back(in.empty() ? -1 : g->add_value(in));
    for (const auto& out : np.output()) {
      if (out.empty()) {
        n.outputs.push_back(-1);
        continue;
      }
      int id = g->add_value(out);
      const Value& v = g->values[static_cast<size_t>(id)];
      if (v.constant || std::find(g->inputs.begin(), g->inputs.end(), id) != g->inputs.end())
        fail(n.describe(), ": output '", out, "' is already a graph input or initializer");
      n.outputs.push_back(id);
    }
    for (const auto& ap : np.attribute()) {
      if (!ap.ref_attr_name().empty()) fail_unsupported(n.describe(), ": attribute references (functions) are not supported");
      n.attrs.emplace(ap.name(), attribute_from_proto(ap, opsets, ext, depth));
    }
    for (const std::string& outer : outer_values_read(n)) n.inputs.push_back(g->add_value(outer));  // (ir.h)
    g->nodes.push_back(std::move(n));
  }
  for (const auto& out : gp.output()) {
    // (a subgraph may output a value of the enclosing graph as it is: If's branch returning an outer tensor)
    int id = is_subgraph ? g->add_value(out.name()) : g->find_value(out.name());
    if (id < 0) fail("graph output '", out.name(), "' is not produced by any node, input or initializer");
    read_value_info(*g, out, "output");
    if (g->values[static_cast<size_t>(id)].shape) g->declared_output_shapes[out.name()] = *g->values[static_cast<size_t>(id)].shape;
    g->outputs.push_back(id);
  }

  link_producers(*g);
  if (!is_subgraph) {  // subgraphs may read values of the enclosing graph
    for (const Node& n : g->nodes)
      for (int in : n.inputs) {
        if (in < 0) continue;
        const Value& v = g->values[static_cast<size_t>(in)];
        if (v.producer < 0 && !v.constant && std::find(g->inputs.begin(), g->inputs.end(), in) == g->inputs.end())
          fail(n.describe(), ": input '", v.name, "' is not produced by any node, graph input or initializer");
      }
  }
  topological_sort(*g);
  return g;
}

// `model_file`: the mapped file `mp` was parsed from with its tensors left in place (null when they were not).
Model model_from_proto(const onnx::ModelProto& mp, const std::string& path, std::shared_ptr<MappedFile> model_file,
                       const LoadOptions& options = {}) {
  if (!mp.has_graph()) fail("'", path, "' has no graph (not an ONNX model?)");
  Model m;
  m.path = path;
  m.dir = fs::path(path).parent_path().string();
  m.ir_version = mp.ir_version();
  m.producer = mp.producer_name();
  m.domain = mp.domain();
  m.description = mp.doc_string();
  m.graph_name = mp.graph().name();
  m.graph_description = mp.graph().doc_string();
  m.model_version = mp.model_version();
  for (const auto& kv : mp.metadata_props()) m.metadata[kv.key()] = kv.value();
  std::map<std::string, int> opsets;
  for (const auto& os : mp.opset_import()) {
    std::string d = os.domain() == "ai.onnx" ? "" : os.domain();
    opsets[d] = static_cast<int>(os.version());
  }
  if (!opsets.count("")) opsets[""] = 1;
  ExternalData ext(m.dir, std::move(model_file), options.misaligned_views);
  try {
    m.graph = graph_from_proto(mp.graph(), opsets, &ext, 0);
  } catch (const Error&) {
    rethrow_prefixed(path + ": ");
  }
  m.external_files = ext.paths();
  m.mappings = ext.mappings();
  for (const auto& file : m.mappings) file->check();  // (changed during the load: its tensors may hold zeros)
  return m;
}

}  // namespace

void read_model_proto(const std::string& path, onnx::ModelProto& out) {
  auto file = map_file(path);
  parse_message(out, onnx_wire::model_proto(), file->data, file->size, path, "ONNX model");
}

Model load_onnx(const std::string& path, const LoadOptions& options) {
  auto file = map_file(path);
  onnx::ModelProto mp;
  const bool in_place = parse_message(mp, onnx_wire::model_proto(), file->data, file->size, path, "ONNX model", true);
  file->check();  // (changed during the parse: what it read may be zeros)
  return model_from_proto(mp, path, in_place ? file : nullptr, options);
}

Model load_onnx(const onnx::ModelProto& mp, const std::string& path) { return model_from_proto(mp, path, nullptr); }

Tensor load_tensor_pb(const std::string& path, std::string* name) {
  auto file = map_file(path);
  onnx::TensorProto tp;
  parse_message(tp, onnx_wire::tensor_proto(), file->data, file->size, path, "TensorProto");
  if (name) *name = tp.name();
  fs::path dir = fs::path(path).parent_path();
  ExternalData ext(dir.string());
  try {
    return tensor_from_proto(tp, &ext);
  } catch (const Error&) {
    rethrow_prefixed(path + ": ");
  }
}

void save_tensor_pb(const Tensor& t, const std::string& name, const std::string& path) {
  onnx::TensorProto tp;
  tp.set_name(name);
  tp.set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) tp.add_dims(d);
  tp.set_raw_data(t.raw(), t.nbytes());
  std::ofstream f(path, std::ios::binary);
  if (!f || !tp.SerializeToOstream(&f)) fail("cannot write '", path, "'");
}

}  // namespace tern
