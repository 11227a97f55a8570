// SPDX-License-Identifier: Apache-2.0
#include "protocol/opening.h"

namespace tally::protocol::opening {
namespace {

Status failed(const std::string& why) {
  return Status::invalidUsage(std::string(kFailed) + ": " + why);
}

}  // namespace

Status ReducerSide::start(const auth::JobToken* token, ReducerSide* out) {
  ReducerSide side;
  side.token_ = token;
  TALLY_RETURN_IF_ERROR(auth::randomBytes(side.nonce_.data(), side.nonce_.size()));
  *out = side;
  return Status::ok();
}

wire::Frame ReducerSide::challenge() const {
  wire::Challenge c;
  c.auth_required = authRequired();
  c.nonce = nonce_;
  return wire::encodeChallenge(c);
}

Status ReducerSide::checkAnswer(const uint8_t* header, size_t size, wire::Frame* proof) const {
  wire::MsgType type;
  Status st = wire::peekType(header, size, &type);
  if (!st.isOk()) return failed("the worker's first message is not valid (" + st.message() + ")");
  if (type == wire::MsgType::kHello) {
    return failed(
        "this reducer requires the job token and the worker has none (set "
        "TALLY_JOB_TOKEN or TALLY_JOB_TOKEN_FILE on every worker)");
  }
  if (type != wire::MsgType::kAnswer) {
    return failed(std::string("the worker sent ") + wire::msgTypeName(type) +
                  " instead of its proof of the job token");
  }
  wire::Answer answer;
  TALLY_RETURN_IF_ERROR(wire::decodeAnswer(header, size, &answer));
  // A worker that echoes our nonce as its own would let a reflected MAC pass if the roles were
  // not in the MAC; they are, but refuse the echo anyway.
  if (answer.nonce == nonce_) return failed("the worker reused this reducer's nonce");
  if (!token_->verify(auth::Role::kWorker, nonce_, answer.nonce, answer.mac)) {
    return failed("the worker's proof does not match this reducer's job token");
  }
  wire::Proof p;
  p.mac = token_->prove(auth::Role::kReducer, nonce_, answer.nonce);
  *proof = wire::encodeProof(p);
  return Status::ok();
}

Status unexpectedAnswer() {
  return failed(
      "the worker has a job token and this reducer has none (give tally-reducer the "
      "same token: --token-file, TALLY_JOB_TOKEN or TALLY_JOB_TOKEN_FILE)");
}

Status WorkerSide::onChallenge(const uint8_t* header, size_t size, bool* send_answer,
                               wire::Frame* answer, std::string* reject_reason) {
  reject_reason->clear();
  wire::MsgType type;
  Status st = wire::peekType(header, size, &type);
  if (!st.isOk()) {
    return Status::remote("reducer " + reducer_ +
                          " opened with an invalid message: " + st.message());
  }
  if (type != wire::MsgType::kChallenge) {
    return Status::remote("reducer " + reducer_ + " opened with " + wire::msgTypeName(type) +
                          " instead of a Challenge");
  }
  wire::Challenge c;
  TALLY_RETURN_IF_ERROR(wire::decodeChallenge(header, size, &c));
  if (!c.auth_required) {
    if (!token_->empty()) {
      *reject_reason = std::string(kFailed) +
                       ": the worker has a job token and this reducer has none, so it cannot "
                       "prove it is the job's reducer";
      return failed("reducer " + reducer_ +
                    " does not authenticate (it has no job token) and this worker has one; "
                    "give tally-reducer the same token (--token-file, TALLY_JOB_TOKEN or "
                    "TALLY_JOB_TOKEN_FILE)");
    }
    *send_answer = false;
    return Status::ok();
  }
  if (token_->empty()) {
    // Say Hello without an Answer: the reducer refuses it with a Reject that names the cause,
    // and logs and counts the refusal on its side.
    *send_answer = false;
    return Status::ok();
  }
  reducer_nonce_ = c.nonce;
  TALLY_RETURN_IF_ERROR(auth::randomBytes(nonce_.data(), nonce_.size()));
  wire::Answer a;
  a.nonce = nonce_;
  a.mac = token_->prove(auth::Role::kWorker, reducer_nonce_, nonce_);
  *answer = wire::encodeAnswer(a);
  *send_answer = true;
  authenticated_ = true;
  return Status::ok();
}

Status WorkerSide::checkProof(const uint8_t* header, size_t size) const {
  wire::Proof p;
  Status st = wire::decodeProof(header, size, &p);
  if (!st.isOk()) {
    return failed("reducer " + reducer_ + " sent no valid proof of the job token (" + st.message() +
                  ")");
  }
  if (!token_->verify(auth::Role::kReducer, reducer_nonce_, nonce_, p.mac)) {
    return failed("reducer " + reducer_ +
                  " could not prove the job token (another job's "
                  "reducer, or not a reducer of this job)");
  }
  return Status::ok();
}

}  // namespace tally::protocol::opening
