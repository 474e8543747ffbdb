#include "graph/onnx_wire.h"

namespace tern::onnx_wire {
namespace {

// The messages of onnx-ml.proto (ONNX 1.12, Debian's libonnx-dev), in one index space.
enum Index {
  kModel,
  kGraph,
  kNode,
  kAttribute,
  kValueInfo,
  kTensor,
  kSegment,
  kSparseTensor,
  kTensorShape,
  kDimension,
  kType,
  kTypeTensor,
  kTypeSequence,
  kTypeMap,
  kTypeOptional,
  kTypeSparseTensor,
  kTypeOpaque,
  kStringString,
  kTensorAnnotation,
  kOperatorSetId,
  kFunction,
  kTrainingInfo,
  kCount
};

constexpr Kind M = Kind::Message, S = Kind::String, B = Kind::Bytes, F = Kind::PackedFixed, V = Kind::PackedVarint;

constexpr Field kModelFields[] = {{2, S, 0, "producer_name"},
                                  {3, S, 0, "producer_version"},
                                  {4, S, 0, "domain"},
                                  {6, S, 0, "doc_string"},
                                  {7, M, kGraph, "graph"},
                                  {8, M, kOperatorSetId, "opset_import"},
                                  {14, M, kStringString, "metadata_props"},
                                  {20, M, kTrainingInfo, "training_info"},
                                  {25, M, kFunction, "functions"}};
constexpr Field kGraphFields[] = {{1, M, kNode, "node"},
                                  {2, S, 0, "name"},
                                  {5, M, kTensor, "initializer"},
                                  {10, S, 0, "doc_string"},
                                  {11, M, kValueInfo, "input"},
                                  {12, M, kValueInfo, "output"},
                                  {13, M, kValueInfo, "value_info"},
                                  {14, M, kTensorAnnotation, "quantization_annotation"},
                                  {15, M, kSparseTensor, "sparse_initializer"}};
constexpr Field kNodeFields[] = {
    {1, S, 0, "input"},      {2, S, 0, "output"}, {3, S, 0, "name"}, {4, S, 0, "op_type"}, {5, M, kAttribute, "attribute"},
    {6, S, 0, "doc_string"}, {7, S, 0, "domain"}};
constexpr Field kAttributeFields[] = {{1, S, 0, "name"},
                                      {4, B, 0, "s"},
                                      {5, M, kTensor, "t"},
                                      {6, M, kGraph, "g"},
                                      {7, F, 0, "floats"},
                                      {8, V, 0, "ints"},
                                      {9, B, 0, "strings"},
                                      {10, M, kTensor, "tensors"},
                                      {11, M, kGraph, "graphs"},
                                      {13, S, 0, "doc_string"},
                                      {14, M, kType, "tp"},
                                      {15, M, kType, "type_protos"},
                                      {21, S, 0, "ref_attr_name"},
                                      {22, M, kSparseTensor, "sparse_tensor"},
                                      {23, M, kSparseTensor, "sparse_tensors"}};
constexpr Field kValueInfoFields[] = {{1, S, 0, "name"}, {2, M, kType, "type"}, {3, S, 0, "doc_string"}};
constexpr Field kTensorFields[] = {{1, V, 0, "dims"},         {3, M, kSegment, "segment"}, {4, F, 0, "float_data"},
                                   {5, V, 0, "int32_data"},   {6, B, 0, "string_data"},    {7, V, 0, "int64_data"},
                                   {8, S, 0, "name"},         {9, B, 0, "raw_data"},       {10, F, 0, "double_data"},
                                   {11, V, 0, "uint64_data"}, {12, S, 0, "doc_string"},    {13, M, kStringString, "external_data"}};
constexpr Field kSparseTensorFields[] = {{1, M, kTensor, "values"}, {2, M, kTensor, "indices"}, {3, V, 0, "dims"}};
constexpr Field kTensorShapeFields[] = {{1, M, kDimension, "dim"}};
constexpr Field kDimensionFields[] = {{2, S, 0, "dim_param"}, {3, S, 0, "denotation"}};
constexpr Field kTypeFields[] = {{1, M, kTypeTensor, "tensor_type"},    {4, M, kTypeSequence, "sequence_type"},
                                 {5, M, kTypeMap, "map_type"},          {6, S, 0, "denotation"},
                                 {7, M, kTypeOpaque, "opaque_type"},    {8, M, kTypeSparseTensor, "sparse_tensor_type"},
                                 {9, M, kTypeOptional, "optional_type"}};
constexpr Field kTypeTensorFields[] = {{2, M, kTensorShape, "shape"}};
constexpr Field kTypeSequenceFields[] = {{1, M, kType, "elem_type"}};
constexpr Field kTypeMapFields[] = {{2, M, kType, "value_type"}};
constexpr Field kTypeOptionalFields[] = {{1, M, kType, "elem_type"}};
constexpr Field kTypeSparseTensorFields[] = {{2, M, kTensorShape, "shape"}};
constexpr Field kTypeOpaqueFields[] = {{1, S, 0, "domain"}, {2, S, 0, "name"}};
constexpr Field kStringStringFields[] = {{1, S, 0, "key"}, {2, S, 0, "value"}};
constexpr Field kTensorAnnotationFields[] = {{1, S, 0, "tensor_name"}, {2, M, kStringString, "quant_parameter_tensor_names"}};
constexpr Field kOperatorSetIdFields[] = {{1, S, 0, "domain"}};
constexpr Field kFunctionFields[] = {{1, S, 0, "name"},
                                     {4, S, 0, "input"},
                                     {5, S, 0, "output"},
                                     {6, S, 0, "attribute"},
                                     {7, M, kNode, "node"},
                                     {8, S, 0, "doc_string"},
                                     {9, M, kOperatorSetId, "opset_import"},
                                     {10, S, 0, "domain"}};
constexpr Field kTrainingInfoFields[] = {{1, M, kGraph, "initialization"},
                                         {2, M, kGraph, "algorithm"},
                                         {3, M, kStringString, "initialization_binding"},
                                         {4, M, kStringString, "update_binding"}};

constexpr Message kMessages[kCount] = {
    {"onnx.ModelProto", kModelFields},
    {"onnx.GraphProto", kGraphFields},
    {"onnx.NodeProto", kNodeFields},
    {"onnx.AttributeProto", kAttributeFields},
    {"onnx.ValueInfoProto", kValueInfoFields},
    {"onnx.TensorProto", kTensorFields},
    {"onnx.TensorProto.Segment", {}},
    {"onnx.SparseTensorProto", kSparseTensorFields},
    {"onnx.TensorShapeProto", kTensorShapeFields},
    {"onnx.TensorShapeProto.Dimension", kDimensionFields},
    {"onnx.TypeProto", kTypeFields},
    {"onnx.TypeProto.Tensor", kTypeTensorFields},
    {"onnx.TypeProto.Sequence", kTypeSequenceFields},
    {"onnx.TypeProto.Map", kTypeMapFields},
    {"onnx.TypeProto.Optional", kTypeOptionalFields},
    {"onnx.TypeProto.SparseTensor", kTypeSparseTensorFields},
    {"onnx.TypeProto.Opaque", kTypeOpaqueFields},
    {"onnx.StringStringEntryProto", kStringStringFields},
    {"onnx.TensorAnnotation", kTensorAnnotationFields},
    {"onnx.OperatorSetIdProto", kOperatorSetIdFields},
    {"onnx.FunctionProto", kFunctionFields},
    {"onnx.TrainingInfoProto", kTrainingInfoFields},
};

}  // namespace

const Field* Message::find(int number) const {
  for (const Field& f : fields)
    if (f.number == number) return &f;
  return nullptr;
}

std::span<const Message> messages() { return kMessages; }
int model_proto() { return kModel; }
int tensor_proto() { return kTensor; }

}  // namespace tern::onnx_wire
