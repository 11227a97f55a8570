// SPDX-License-Identifier: Apache-2.0
#include "worker_client/coll_handle.h"

#include <strings.h>

#include <cstring>
#include <string>

#include "common/hmac_sha256.h"
#include "worker_client/coll_client.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

namespace {

// Handle layout (little-endian): magic u32 | version u16 | reserved u16 | comm id (hi u64, lo u64)
// | config digest u64 | nreducers u32 | zeros up to kCollHandleBytes.
constexpr uint32_t kHandleMagic = 0x48594c54;  // "TLYH"
// 2: the relay seal's flag and key (relay_seal.h).
constexpr uint16_t kHandleVersion = 2;
constexpr size_t kHandleKeyOffset = 40;
constexpr size_t kHandleUsedBytes = kHandleKeyOffset + RelaySeal::kKeyBytes;
static_assert(kHandleUsedBytes <= kCollHandleBytes);
constexpr uint32_t kHandleSealed = 1u << 0;

void putLe(uint8_t* p, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t getLe(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// FNV-1a over what every rank must agree on: the reducer list (in order), the slice plan and
// the checksum setting.
uint64_t configDigest(const CollOptions& o) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) {
      h ^= p[i];
      h *= 0x100000001b3ull;
    }
  };
  for (const std::string& r : o.reducers) {
    mix(r.data(), r.size());
    mix(",", 1);
  }
  uint8_t slice[8];
  putLe(slice, o.slice_bytes, 8);
  mix(slice, sizeof(slice));
  putLe(slice, o.slices_per_reducer, 8);
  mix(slice, sizeof(slice));
  putLe(slice, o.min_slice_bytes, 8);
  mix(slice, sizeof(slice));
  if (o.checksum) mix("+crc32c", 7);  // absent when off: digests from before it stay the same
  return h;
}

// 128 bits from OpenSSL's CSPRNG: ids of other jobs on a shared reducer cannot be guessed, and
// two communicators meet by accident with probability 2^-128. No weaker fallback.
Status randomCommId(wire::CommId* out) {
  uint8_t bytes[16];
  TALLY_RETURN_IF_ERROR(auth::randomBytes(bytes, sizeof(bytes)));
  out->hi = getLe(bytes, 8);
  out->lo = getLe(bytes + 8, 8);
  return Status::ok();
}

}  // namespace

Status encodeHandle(const CollOptions& options, void* out) {
  wire::CommId id;
  TALLY_RETURN_IF_ERROR(randomCommId(&id));
  uint8_t h[kCollHandleBytes] = {};
  putLe(h, kHandleMagic, 4);
  putLe(h + 4, kHandleVersion, 2);
  putLe(h + 8, id.hi, 8);
  putLe(h + 16, id.lo, 8);
  putLe(h + 24, configDigest(options), 8);
  putLe(h + 32, options.reducers.size(), 4);
  if (!options.job_token.empty() || !options.job_token_file.empty()) {
    // Rank 0's key is the communicator's; the other ranks' go unused.
    RelaySeal::Key key;
    TALLY_RETURN_IF_ERROR(RelaySeal::newKey(&key));
    putLe(h + 36, kHandleSealed, 4);
    std::memcpy(h + kHandleKeyOffset, key.data(), key.size());
    explicit_bzero(key.data(), key.size());
  }
  std::memcpy(out, h, sizeof(h));
  explicit_bzero(h, sizeof(h));
  return Status::ok();
}

Status decodeHandle(const void* handle, int rank, HandleInfo* out) {
  if (handle == nullptr)
    return Status::internal("rank " + std::to_string(rank) + "'s handle is null");
  const auto* p = static_cast<const uint8_t*>(handle);
  if (getLe(p, 4) != kHandleMagic || getLe(p + 4, 2) != kHandleVersion) {
    return Status::invalidUsage("rank " + std::to_string(rank) +
                                "'s CollNet handle is not from this version of Tally");
  }
  HandleInfo h;
  h.comm.hi = getLe(p + 8, 8);
  h.comm.lo = getLe(p + 16, 8);
  h.digest = getLe(p + 24, 8);
  h.nreducers = static_cast<uint32_t>(getLe(p + 32, 4));
  h.sealed = (getLe(p + 36, 4) & kHandleSealed) != 0;
  std::memcpy(h.key.data(), p + kHandleKeyOffset, h.key.size());
  *out = h;
  return Status::ok();
}

Status relaySealFor(const HandleInfo& rank0, const auth::JobToken& token, int rank,
                    RelaySeal* out) {
  if (rank0.sealed != !token.empty()) {
    return Status::invalidUsage(
        std::string("rank ") + std::to_string(rank) + " (this rank) " +
        (token.empty() ? "has no job token and rank 0 has one"
                       : "has a job token and rank 0 has none") +
        " (TALLY_JOB_TOKEN or TALLY_JOB_TOKEN_FILE must be set alike on every rank)");
  }
  if (!rank0.sealed) return Status::ok();
  Status why;
  const hmac::HmacSha256* h = hmac::shared(&why);
  if (h == nullptr) return why;
  *out = RelaySeal(h, rank0.key, rank0.comm);
  return Status::ok();
}

Status checkHandles(const std::vector<HandleInfo>& infos, const CollOptions& options, int rank) {
  for (size_t i = 1; i < infos.size(); ++i) {
    if (infos[i].digest != infos[0].digest || infos[i].nreducers != infos[0].nreducers) {
      return Status::invalidUsage("rank " + std::to_string(i) +
                                  " has a different TALLY_REDUCERS, TALLY_CHECKSUM or slice plan "
                                  "(TALLY_SLICE_BYTES, TALLY_SLICES_PER_REDUCER, "
                                  "TALLY_MIN_SLICE_BYTES, or the link speed they follow) than "
                                  "rank 0 (" +
                                  std::to_string(infos[i].nreducers) + " vs " +
                                  std::to_string(infos[0].nreducers) + " reducers)");
    }
  }
  if (configDigest(options) != infos[0].digest) {
    return Status::invalidUsage("rank " + std::to_string(rank) +
                                " (this rank) has a different TALLY_REDUCERS, TALLY_CHECKSUM "
                                "or slice plan than its handle or rank 0");
  }
  return Status::ok();
}

}  // namespace tally::worker_client
