// SPDX-License-Identifier: Apache-2.0
// The seal on a communicator's failover messages (docs/failover.md, "Who may say what"): every
// rank MACs each Relay it sends under a key that only the ranks know, so a reducer, which carries
// the Relays and may hold the job token, cannot forge or alter one. Rank 0 draws the key (16
// bytes, getrandom) into its CollNet handle, which NCCL passes between the ranks and never to a
// reducer; every rank takes it from rank 0's handle at connect.
//
//   seal = HMAC-SHA256(key, "tally-relay-v1" | 0x00 | communicator id | the Relay as encoded
//          with `from` set to the sender's rank and the seal zero), its first 16 bytes
//
// The sender's rank is in the MAC and the reducer stamps `from`, so a relay passed off as
// another rank's does not open. Copies and replays of a sealed relay do open: the epochs make
// them stale (keeper.cc). Only with a job token: without one any host may act as a
// reducer and sum wrongly, so a seal would buy nothing, and libcrypto may be absent.
//
// Threads: immutable after construction; any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/hmac_sha256.h"
#include "common/status.h"
#include "protocol/wire.h"

namespace tally::worker_client {

class RelaySeal {
 public:
  static constexpr size_t kKeyBytes = 16;
  using Key = std::array<uint8_t, kKeyBytes>;

  // A fresh random key (rank 0, in makeHandle).
  static Status newKey(Key* out);

  RelaySeal() = default;  // no seal: relays go out with zeros and are taken unchecked
  // Seals under `key` for communicator `comm`, with the HMAC from `hmac` (not null, outlives this).
  RelaySeal(const hmac::HmacSha256* hmac, const Key& key, const protocol::wire::CommId& comm)
      : hmac_(hmac), key_(key), comm_(comm) {}
  RelaySeal(const RelaySeal&) = default;
  RelaySeal& operator=(const RelaySeal&) = default;
  ~RelaySeal();

  bool active() const { return hmac_ != nullptr; }
  // Sets relay->seal for a relay that rank `from` sends (relay->from is left as it is, 0 on the
  // way out). Without a seal, zeros.
  Status seal(uint32_t from, protocol::wire::Relay* relay) const;
  // Whether relay->seal is the one rank relay.from would have made, compared in constant time.
  // Without a seal, true.
  bool opens(const protocol::wire::Relay& relay) const;

 private:
  Status compute(uint32_t from, const protocol::wire::Relay& relay,
                 std::array<uint8_t, protocol::wire::kRelaySealBytes>* out) const;

  const hmac::HmacSha256* hmac_ = nullptr;
  Key key_{};
  protocol::wire::CommId comm_;
};

}  // namespace tally::worker_client
