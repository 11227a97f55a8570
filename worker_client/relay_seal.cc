// SPDX-License-Identifier: Apache-2.0
#include "worker_client/relay_seal.h"

#include <strings.h>

#include <cstring>
#include <vector>

#include "common/auth.h"

namespace tally::worker_client {
namespace wire = protocol::wire;

namespace {

constexpr char kLabel[] = "tally-relay-v1";  // with its terminating 0 byte

void putLe64(std::vector<uint8_t>* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

Status RelaySeal::newKey(Key* out) { return auth::randomBytes(out->data(), out->size()); }

RelaySeal::~RelaySeal() { explicit_bzero(key_.data(), key_.size()); }

Status RelaySeal::compute(uint32_t from, const wire::Relay& relay,
                          std::array<uint8_t, wire::kRelaySealBytes>* out) const {
  wire::Relay plain = relay;
  plain.from = from;
  plain.seal.fill(0);
  const wire::Frame frame = wire::encodeRelay(plain);
  std::vector<uint8_t> msg(kLabel, kLabel + sizeof(kLabel));
  putLe64(&msg, comm_.hi);
  putLe64(&msg, comm_.lo);
  msg.insert(msg.end(), frame.data(), frame.data() + frame.size);
  hmac::Digest digest;
  TALLY_RETURN_IF_ERROR(hmac_->compute(key_.data(), key_.size(), msg.data(), msg.size(), &digest));
  std::memcpy(out->data(), digest.data(), out->size());
  return Status::ok();
}

Status RelaySeal::seal(uint32_t from, wire::Relay* relay) const {
  relay->seal.fill(0);
  if (!active()) return Status::ok();
  return compute(from, *relay, &relay->seal);
}

bool RelaySeal::opens(const wire::Relay& relay) const {
  if (!active()) return true;
  std::array<uint8_t, wire::kRelaySealBytes> want;
  if (!compute(relay.from, relay, &want).isOk()) return false;
  return auth::constantTimeEqual(want.data(), relay.seal.data(), want.size());
}

}  // namespace tally::worker_client
