// The one place NCCL's element types and reduction operations become Tally's (STYLE 1). Values
// are numerically equal, so each conversion is a range check and a cast.
#pragma once

#include <cstring>

#include "common/types.h"
#include "plugin/abi/nccl_types.h"

namespace tally::plugin {

static_assert(static_cast<int>(DataType::kFloat8e5m2) == ncclFloat8e5m2);
static_assert(static_cast<int>(DataType::kBfloat16) == ncclBfloat16);
static_assert(kNumDataTypes == ncclNumTypes);
static_assert(static_cast<int>(ReduceOp::kMin) == ncclMin);
static_assert(static_cast<int>(ReduceOp::kProd) == ncclProd);

// The int NCCL passed in an enum argument. NCCL may pass values its enum does not list (a newer
// type, a user-created op), and reading such a value through the enum type is undefined
// (UBSan's enum check): the bytes are read instead, once, in the function the table points to.
template <typename Enum>
int rawValue(const Enum& in) {
  static_assert(sizeof(Enum) == sizeof(int));
  int raw;
  std::memcpy(&raw, &in, sizeof raw);
  return raw;
}

// False for anything Tally does not reduce (ncclAvg, user-defined ops, out of range).
inline bool toDataType(int in, DataType* out) {
  if (!isValidDataType(in)) return false;
  *out = static_cast<DataType>(in);
  return true;
}

inline bool toReduceOp(int in, ReduceOp* out) {
  if (!isValidReduceOp(in)) return false;
  *out = static_cast<ReduceOp>(in);
  return true;
}

}  // namespace tally::plugin
