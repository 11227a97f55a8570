// SPDX-License-Identifier: Apache-2.0
// Tally's own names for element types and reduction operations. plugin/ converts NCCL's
// ncclDataType_t and ncclRedOp_t to these once; nothing below plugin/ sees an NCCL type.
// The numeric values equal NCCL's, which keeps the conversion a checked cast.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tally {

enum class DataType : uint8_t {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
  kFloat8e4m3 = 10,
  kFloat8e5m2 = 11,
};
inline constexpr int kNumDataTypes = 12;

enum class ReduceOp : uint8_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };
inline constexpr int kNumReduceOps = 4;

constexpr size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64: return 8;
  }
  return 0;
}

constexpr bool isValidDataType(int v) { return v >= 0 && v < kNumDataTypes; }
constexpr bool isValidReduceOp(int v) { return v >= 0 && v < kNumReduceOps; }

// "float32", "bfloat16", "f8e4m3", ... (nccl-tests' -d names where they exist).
const char* dataTypeName(DataType t);
const char* reduceOpName(ReduceOp op);
// Inverse of the above; false when the name is unknown.
bool parseDataType(const char* name, DataType* out);
bool parseReduceOp(const char* name, ReduceOp* out);

}  // namespace tally
