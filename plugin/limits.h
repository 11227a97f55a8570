// Limits Tally reports to NCCL and enforces (reference sections 3, 12.3 and 16).
#pragma once

#include <cstdint>

#include "plugin/abi/nccl_types.h"
#include "transport/transport.h"

namespace tally::plugin {

inline constexpr int kMaxComms = 65536;
inline constexpr int kMaxRecvs = transport::kMaxRecvs;  // grouped receives: 8
inline constexpr int kMaxNetRequests = NCCL_NET_MAX_REQUESTS;
// NCCL may post maxRecvs times the request limit on a send comm.
inline constexpr int kMaxSendRequests = kMaxNetRequests * kMaxRecvs;
inline constexpr uint64_t kMaxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;  // 1 TiB
inline constexpr uint64_t kMaxCollBytes = 1ull << 30;  // 1 GiB: test() reports it as an int

static_assert(kMaxRecvs == 8, "properties advertise maxRecvs 8");
static_assert(kMaxNetRequests == 32);

}  // namespace tally::plugin
