// The one place NCCL's element types and reduction operations become Tally's (STYLE 1). Values
// are numerically equal, so each conversion is a range check and a cast.
#pragma once

#include "common/types.h"
#include "plugin/abi/nccl_types.h"

namespace tally::plugin {

static_assert(static_cast<int>(DataType::kFloat8e5m2) == ncclFloat8e5m2);
static_assert(static_cast<int>(DataType::kBfloat16) == ncclBfloat16);
static_assert(kNumDataTypes == ncclNumTypes);
static_assert(static_cast<int>(ReduceOp::kMin) == ncclMin);
static_assert(static_cast<int>(ReduceOp::kProd) == ncclProd);

// False for anything Tally does not reduce (ncclAvg, user-defined ops, out of range).
inline bool toDataType(ncclDataType_t in, DataType* out) {
  if (!isValidDataType(static_cast<int>(in))) return false;
  *out = static_cast<DataType>(in);
  return true;
}

inline bool toReduceOp(ncclRedOp_t in, ReduceOp* out) {
  if (!isValidReduceOp(static_cast<int>(in))) return false;
  *out = static_cast<ReduceOp>(in);
  return true;
}

}  // namespace tally::plugin
