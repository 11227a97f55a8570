// SPDX-License-Identifier: Apache-2.0
#include "common/types.h"

#include <cstring>

namespace tally {

namespace {
constexpr const char* kTypeNames[kNumDataTypes] = {"int8",    "uint8",  "int32",  "uint32",
                                                   "int64",   "uint64", "half",   "float",
                                                   "double",  "bfloat16", "f8e4m3", "f8e5m2"};
constexpr const char* kOpNames[kNumReduceOps] = {"sum", "prod", "max", "min"};
}  // namespace

const char* dataTypeName(DataType t) {
  int i = static_cast<int>(t);
  return isValidDataType(i) ? kTypeNames[i] : "invalid";
}

const char* reduceOpName(ReduceOp op) {
  int i = static_cast<int>(op);
  return isValidReduceOp(i) ? kOpNames[i] : "invalid";
}

bool parseDataType(const char* name, DataType* out) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (std::strcmp(name, kTypeNames[i]) == 0) {
      *out = static_cast<DataType>(i);
      return true;
    }
  }
  static const struct { const char* alias; DataType type; } kAliases[] = {
      {"float16", DataType::kFloat16}, {"float32", DataType::kFloat32},
      {"float64", DataType::kFloat64}, {"char", DataType::kInt8}, {"int", DataType::kInt32},
      {"bf16", DataType::kBfloat16}, {"fp16", DataType::kFloat16}, {"fp32", DataType::kFloat32}};
  for (const auto& a : kAliases) {
    if (std::strcmp(name, a.alias) == 0) {
      *out = a.type;
      return true;
    }
  }
  return false;
}

bool parseReduceOp(const char* name, ReduceOp* out) {
  for (int i = 0; i < kNumReduceOps; ++i) {
    if (std::strcmp(name, kOpNames[i]) == 0) {
      *out = static_cast<ReduceOp>(i);
      return true;
    }
  }
  return false;
}

}  // namespace tally
