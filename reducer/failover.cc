// SPDX-License-Identifier: Apache-2.0
// The reducer's half of failover (docs/failover.md): the Acks it turns into Commits, the Pings it
// answers, the Relays it passes between a communicator's ranks and the Dismiss that ends its part
// in one. The reducer decides nothing about membership: rank 0 does, and the reducer only
// carries its messages, reading of them no more than the kind of change, for its metrics.
#include <algorithm>
#include <chrono>

#include "reducer/server_internal.h"
#include "reducer/session.h"

namespace tally::reducer::server {
namespace wire = protocol::wire;

namespace {

EpochChange epochChangeOf(wire::Change c) {
  switch (c) {
    case wire::Change::kLost:
      return EpochChange::kLost;
    case wire::Change::kJoin:
      return EpochChange::kJoin;
    case wire::Change::kVoid:
      return EpochChange::kVoid;
    case wire::Change::kFail:
      break;
  }
  return EpochChange::kFail;
}

std::string joinedOf(uint32_t joined, uint32_t nranks) {
  return std::to_string(joined) + " of " + std::to_string(nranks) + " ranks joined";
}

}  // namespace

AckFloor::AckFloor(uint32_t nranks)
    : calls_{std::vector<uint64_t>(nranks, 0), 0, nranks},
      epochs_{std::vector<uint64_t>(nranks, 0), 0, nranks} {}

void AckFloor::raise(uint32_t rank, const wire::AckPoint& to) {
  calls_.raise(rank, to.calls);
  epochs_.raise(rank, to.recovery_epoch);
}

wire::AckPoint AckFloor::least() const {
  return wire::AckPoint{calls_.least, static_cast<uint32_t>(epochs_.least)};
}

void AckFloor::Field::raise(uint32_t rank, uint64_t to) {
  uint64_t& mine = by_rank[rank];
  if (to <= mine) return;
  const uint64_t from = mine;
  mine = to;
  // Every rank is at `least` or above, so only the last one to leave it moves it.
  if (from != least || --holders > 0) return;
  least = by_rank[0];
  holders = 0;
  for (uint64_t v : by_rank) {
    if (v < least) {
      least = v;
      holders = 1;
    } else if (v == least) {
      holders++;
    }
  }
}

bool RelayAllowance::take(std::chrono::steady_clock::time_point now) {
  if (refilled != std::chrono::steady_clock::time_point{} && now > refilled) {
    const double seconds = std::chrono::duration<double>(now - refilled).count();
    tokens = std::min<double>(kRelayBurst, tokens + seconds * kRelayPerSecond);
  }
  refilled = std::max(refilled, now);
  if (tokens < 1) return false;
  tokens -= 1;
  return true;
}

Status Communicator::ack(int rank, const wire::AckPoint& point) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!formed()) {
      // Before Ready no rank has a result to acknowledge.
      return Status::remote("rank " + std::to_string(rank) + " sent an Ack before every rank " +
                            "joined (" + joinedOf(joined_, nranks) + ")");
    }
    acks_.raise(static_cast<uint32_t>(rank), point);
    const wire::AckPoint least = acks_.least();
    if (least.calls > committed_.calls || least.recovery_epoch > committed_.recovery_epoch) {
      committed_ = least;  // neither field falls: each is a minimum of values that only rise
      std::fill(owed_.begin(), owed_.end(), true);
      owed_any_.store(true, std::memory_order_seq_cst);  // before sendCommits reads the counts
      commit_due_ = true;
    }
    if (!commit_due_ || committing_ || failed()) return Status::ok();
    committing_ = true;
  }
  sendCommits();
  return Status::ok();
}

void Communicator::sliceCompleted(wire::AckPoint* out) {
  // Without the lock when no Commit is owed (most slices): the counts fall first, then the flag
  // is read, and ack() sets the flag before it reads the counts, all sequentially consistent. So
  // either ack() sees the fall (and sends the Commit itself), or this sees the flag and takes
  // the Commit under the lock below; never neither.
  for (uint32_t r = 0; r < nranks; ++r) pending_inputs_[r].fetch_sub(1, std::memory_order_seq_cst);
  if (!owed_any_.load(std::memory_order_seq_cst)) {
    for (uint32_t r = 0; r < nranks; ++r) out[r] = wire::AckPoint{};
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (uint32_t r = 0; r < nranks; ++r) {
    out[r] = owed_[r] ? committed_ : wire::AckPoint{};
    owed_[r] = false;
  }
  owed_any_.store(false, std::memory_order_seq_cst);  // every rank's taken just now
}

void Communicator::sendCommits() {
  // Only the committing thread touches commit_to_: one vector for every Commit, no allocation
  // per call once it has grown to the members.
  for (;;) {
    wire::AckPoint point;
    {
      std::lock_guard<std::mutex> lock(mu_);
      commit_to_.clear();
      if (!commit_due_ || failed()) {
        committing_ = false;
        return;
      }
      commit_due_ = false;
      point = committed_;
      for (uint32_t r = 0; r < members_.size(); ++r) {
        // A rank with an input in a slice not yet complete gets this Commit with that slice's
        // result (sliceCompleted takes it under this lock); a count read as 0 here can only
        // rise for slices whose results come after this Commit.
        if (!owed_[r] || pending_inputs_[r].load(std::memory_order_seq_cst) > 0) continue;
        owed_[r] = false;
        if (members_[r] && open_[r]) commit_to_.push_back(members_[r]);
      }
    }
    // A newer Commit computed meanwhile waits for the next round, after this one.
    const wire::Frame frame = wire::encodeCommit(point);
    for (auto& m : commit_to_) {
      OutMsg msg;
      msg.header = frame;
      m->send(std::move(msg));
    }
  }
}

Status Communicator::relay(int rank, wire::Relay msg, std::chrono::steady_clock::time_point now) {
  bool decided = false;
  std::vector<std::shared_ptr<Member>> to;  // a failover message is rare: no pooling needed
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!formed()) {
      return Status::remote("rank " + std::to_string(rank) + " sent a Relay before every rank " +
                            "joined (" + joinedOf(joined_, nranks) + ")");
    }
    if (!relays_[rank].take(now)) {
      return Status::remote("rank " + std::to_string(rank) + " sent more than " +
                            std::to_string(kRelayBurst) + " failover messages in a burst (at " +
                            "most " + std::to_string(kRelayPerSecond) + " a second after it)");
    }
    if (failed()) return Status::ok();  // every rank has its Error: nothing to fail over to
    for (uint32_t r = 0; r < members_.size(); ++r) {
      // Rank 0 decides and tells every rank; the others speak to rank 0 only.
      const bool wanted = rank == 0 ? r != 0 : r == 0;
      if (wanted && members_[r] && open_[r]) to.push_back(members_[r]);
    }
    // Rank 0 sends each Decide through every live reducer, and again after a lost copy: only
    // the first copy of an epoch counts, and only an epoch later than this reducer has seen.
    if (rank == 0 && msg.control.kind == wire::ControlKind::kDecide &&
        msg.control.epoch > decided_epoch_) {
      decided_epoch_ = msg.control.epoch;
      decided = true;
    }
  }
  if (decided) observer_->epochDecided(epochChangeOf(msg.control.change));
  // The sender is whoever's connection it came on, whatever it wrote: no rank can speak as
  // rank 0. Encoding it afresh also drops any bytes the sender put in the padding.
  msg.from = static_cast<uint32_t>(rank);
  const wire::Frame frame = wire::encodeRelay(msg);
  for (auto& m : to) {
    OutMsg out;
    out.header = frame;
    m->send(std::move(out));
  }
  return Status::ok();
}

bool isMemberMessage(wire::MsgType type) {
  return type == wire::MsgType::kAck || type == wire::MsgType::kPing ||
         type == wire::MsgType::kRelay || type == wire::MsgType::kDismiss;
}

bool onMemberMessage(Member& self, Communicator& comm, int rank, wire::MsgType type,
                     const uint8_t* data, size_t size, Ending* ending) {
  auto undecodable = [&](const Status& st) {
    ending->status =
        Status::remote("rank " + std::to_string(rank) + " sent a " + wire::msgTypeName(type) +
                       " that does not decode: " + st.message());
    return false;
  };
  switch (type) {
    case wire::MsgType::kAck: {
      wire::AckPoint point;
      Status st = wire::decodeAck(data, size, &point);
      if (!st.isOk()) return undecodable(st);
      st = comm.ack(rank, point);
      if (!st.isOk()) {
        comm.fail(st.message());
        ending->status = st;
        return false;
      }
      return true;
    }
    case wire::MsgType::kPing: {
      // Answered at once, from the thread that owns the connection: a reducer that waits for a
      // slow rank's input still answers, so only a frozen or unreachable one is suspected. A
      // Ping that comes while this connection's last Pong is still unsent is answered by that
      // one (send() drops this): a member that streams Pings and reads nothing holds one Pong.
      wire::Ping ping;
      Status st = wire::decodePing(data, size, &ping);
      if (!st.isOk()) return undecodable(st);
      OutMsg pong;
      pong.header = wire::encodePong(ping);
      pong.pong = true;
      self.send(std::move(pong));
      return true;
    }
    case wire::MsgType::kRelay: {
      wire::Relay relay;
      Status st = wire::decodeRelay(data, size, &relay);
      if (!st.isOk()) return undecodable(st);
      st = comm.relay(rank, std::move(relay), std::chrono::steady_clock::now());
      if (!st.isOk()) {
        // Every member, this one too, hears why (its Error is flushed before the close).
        comm.fail(st.message());
        ending->status = st;
        return false;
      }
      return true;
    }
    case wire::MsgType::kDismiss: {
      wire::Reason reason;
      Status st = wire::decodeDismiss(data, size, &reason);
      if (!st.isOk()) return undecodable(st);
      ending->status = Status::remote(reason.text);
      ending->dismissed = true;
      return false;
    }
    default:
      break;
  }
  ending->status =
      Status::internal(std::string("not a member's failover message: ") + wire::msgTypeName(type));
  return false;
}

}  // namespace tally::reducer::server
