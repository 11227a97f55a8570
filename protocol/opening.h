// SPDX-License-Identifier: Apache-2.0
// The authenticated opening of a worker-reducer connection (wire v3; the message flow is in
// protocol/wire.h, the MACs in common/auth.h, the reasoning in docs/security.md). These helpers
// decide and build messages; the reducer's Peer and the worker's connect do the I/O.
//
// Every refusal is a Status whose message starts with "authentication failed" and never holds
// the token. kInvalidUsage: the two sides' tokens differ or one side has none (configuration).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/auth.h"
#include "common/status.h"
#include "protocol/wire.h"

namespace tally::protocol::opening {

inline constexpr const char* kFailed = "authentication failed";

// The reducer's side of one connection.
class ReducerSide {
 public:
  // Draws this connection's nonce. `token` is borrowed and must outlive the object.
  static Status start(const auth::JobToken* token, ReducerSide* out);

  bool authRequired() const { return !token_->empty(); }
  // The first message on the connection.
  wire::Frame challenge() const;
  // With authRequired(): checks the worker's first message, which must be a valid Answer. On
  // success *proof is the Proof to send; on failure the Status message is the reason to Reject
  // the worker with (a Hello instead of an Answer: the worker has no token).
  Status checkAnswer(const uint8_t* header, size_t size, wire::Frame* proof) const;

 private:
  const auth::JobToken* token_ = nullptr;
  auth::Nonce nonce_{};
};

// What a reducer without a token says when a worker sends it an Answer anyway.
Status unexpectedAnswer();

// The worker's side of one connection to `reducer` (its address, for messages).
class WorkerSide {
 public:
  WorkerSide(const auth::JobToken* token, std::string reducer)
      : token_(token), reducer_(std::move(reducer)) {}

  // Takes the reducer's Challenge. Success: *answer is set when the reducer requires the token
  // (send it before Hello); *send_answer says whether to. Failure: refuse this reducer; the
  // Status message is for the worker's error (and, when *reject_reason is non-empty, send a
  // Reject with it to the reducer so it logs the refusal).
  Status onChallenge(const uint8_t* header, size_t size, bool* send_answer, wire::Frame* answer,
                     std::string* reject_reason);
  // Whether the reducer owes a Proof (it required the token).
  bool expectsProof() const { return authenticated_; }
  // Checks the reducer's Proof (the first message after the Challenge when expectsProof()).
  Status checkProof(const uint8_t* header, size_t size) const;

 private:
  const auth::JobToken* token_;
  std::string reducer_;
  bool authenticated_ = false;
  auth::Nonce reducer_nonce_{};
  auth::Nonce nonce_{};
};

}  // namespace tally::protocol::opening
