// SPDX-License-Identifier: Apache-2.0
// Communicators: forming them from Hellos, failing them, freeing them when the last member leaves.
#include <algorithm>

#include "common/crc32c.h"
#include "common/log.h"
#include "common/sizes.h"
#include "protocol/slicing.h"
#include "reducer/server_internal.h"

namespace tally::reducer::server {
namespace wire = protocol::wire;
using protocol::pieceOf;
using protocol::rankPart;
using protocol::sliceElements;
using protocol::sliceSpan;
using protocol::Span;

Communicator::Communicator(const wire::Hello& first, Engine* engine, ServerObserver* observer)
    : id(first.comm),
      nranks(first.nranks),
      nreducers(first.nreducers),
      reducer_index(first.reducer_index),
      slice_bytes(first.slice_bytes),
      plan{first.slice_bytes, first.slices_per_reducer, first.min_slice_bytes},
      checksum(first.checksum),
      epoch(first.epoch),
      engine_(engine),
      observer_(observer),
      members_(first.nranks),
      open_(first.nranks, false),
      acks_(first.nranks),
      owed_(first.nranks, false),
      pending_inputs_(new std::atomic<uint32_t>[first.nranks]()),
      relays_(first.nranks),
      decided_epoch_(first.epoch),
      left_(new std::atomic<bool>[first.nranks]()),
      left_why_(first.nranks) {}

void Communicator::markLeftLocked(uint32_t rank, const std::string& why) {
  if (left_[rank].load(std::memory_order_relaxed)) return;
  left_why_[rank] = why;
  left_[rank].store(true, std::memory_order_release);
  left_count_.fetch_add(1, std::memory_order_acq_rel);
}

uint32_t Communicator::resultCrc(const void* data, size_t bytes) const {
  if (!checksum) return 0;
  // Peer::handleHello admits a checksumming Hello only when the library loaded.
  const crc32c::Crc32c* crc = crc32c::shared(nullptr);
  return crc != nullptr ? crc->compute(data, bytes) : 0;
}

std::string Communicator::joinedText() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::to_string(joined_) + " of " + std::to_string(nranks) + " ranks joined";
}

std::string Communicator::describe() const {
  return id.toString() + " (" + std::to_string(nranks) + " ranks)";
}

bool Communicator::fail(const std::string& reason, wire::ErrorScope scope) {
  std::vector<std::shared_ptr<Member>> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.exchange(true, std::memory_order_acq_rel)) return false;
    for (uint32_t r = 0; r < members_.size(); ++r) {
      if (members_[r] && open_[r]) notify.push_back(members_[r]);
    }
  }
  TALLY_WARN("reducer: communicator %s %s: %s", describe().c_str(),
             scope == wire::ErrorScope::kReducer ? "is lost to this reducer" : "failed",
             reason.c_str());
  observer_->communicatorFailed();
  const wire::Frame error = wire::encodeError(wire::Reason{reason}, scope);
  for (auto& p : notify) {
    OutMsg m;
    m.header = error;
    p->send(std::move(m));
  }
  failure_sent_.store(true, std::memory_order_release);
  engine_->dropCommunicator(shared_from_this());
  return true;
}

Status Communicator::checkSlice(const wire::SliceHeader& h, int rank) const {
  // The worker cuts a call as protocol/slicing.h says; anything else means a different
  // TALLY_SLICE_BYTES or reducer list, or a broken client, and would pair up wrong inputs.
  const Span slice = sliceOf(h);
  if (slice.count == 0) {
    return Status::remote("rank " + std::to_string(rank) + " sent " + wire::describeSlice(h) +
                          ", past the last slice of its call");
  }
  if (h.kind != wire::CollKind::kAllReduce) {
    // The window must lie inside the nranks x rank_count vector.
    const uint64_t elt = dataTypeSize(h.type);
    if (h.rank_count > UINT64_MAX / elt / nranks ||
        h.window_offset + h.total_count > h.rank_count * nranks) {
      return Status::remote("rank " + std::to_string(rank) + " sent " + wire::describeSlice(h) +
                            ", whose window passes the end of " + std::to_string(nranks) +
                            " ranks' parts");
    }
  }
  Span want = slice;
  if (h.kind == wire::CollKind::kAllGather) {
    want = pieceOf(
        slice, rankPart(static_cast<uint64_t>(rank), h.rank_count, h.window_offset, h.total_count));
  }
  if (h.offset != want.offset || h.count != want.count) {
    return Status::remote("rank " + std::to_string(rank) + " sent " + wire::describeSlice(h) +
                          ", which does not match its communicator's slices (at most " +
                          std::to_string(slice_bytes) + " bytes, at least " +
                          std::to_string(plan.per_reducer) + " per reducer of at least " +
                          std::to_string(plan.min_slice_bytes) + ")");
  }
  return Status::ok();
}

Span Communicator::sliceOf(const wire::SliceHeader& h) const {
  const uint64_t per_slice = sliceElements(h.total_count, dataTypeSize(h.type), plan, nreducers);
  return sliceSpan(h.total_count, per_slice, h.slice);
}

Span Communicator::partOf(const wire::SliceHeader& h, uint32_t rank) const {
  return rankPart(rank, h.rank_count, h.window_offset, h.total_count);
}

Status CommunicatorRegistry::admitLocked(const wire::Hello& hello, uint64_t* bytes) const {
  // A connection buffers at most bufferedLimit(window) slices (the reader stops there), each at
  // most slice_bytes; results take at most as much again per communicator. Each member's share
  // is reserved as it joins, so a communicator that never forms holds little.
  const uint64_t per_connection =
      static_cast<uint64_t>(bufferedLimit(window_)) * hello.slice_bytes;
  const std::string what =
      "communicator " + hello.comm.toString() + " (" + std::to_string(hello.nranks) + " ranks, " +
      std::to_string(hello.slice_bytes) + "-byte slices, window " + std::to_string(window_) + ")";
  if (per_connection > max_connection_bytes_) {
    return Status::invalidUsage(what + " needs " + formatBytesApprox(per_connection) +
                                " per connection, over this reducer's limit of " +
                                formatBytesApprox(max_connection_bytes_) +
                                " (lower TALLY_SLICE_BYTES or the reducer's --window)");
  }
  const uint64_t need = per_connection * (static_cast<uint64_t>(hello.nranks) + 1);
  if (need > max_communicator_bytes_) {
    return Status::invalidUsage(what + " needs " + formatBytesApprox(need) +
                                ", over this reducer's limit of " +
                                formatBytesApprox(max_communicator_bytes_) + " per communicator");
  }
  const uint64_t now = 2 * per_connection;  // the results and the first member's inputs
  if (now > max_memory_bytes_ - std::min(reserved_bytes_, max_memory_bytes_)) {
    return Status::system("reducer full: " + what + " needs " + formatBytesApprox(now) +
                          " to start, and " + formatBytesApprox(reserved_bytes_) + " of its " +
                          formatBytesApprox(max_memory_bytes_) + " are held by " +
                          std::to_string(comms_.size()) + " other communicators");
  }
  *bytes = now;
  return Status::ok();
}

Status CommunicatorRegistry::admitMemberLocked(const Communicator& comm, uint64_t* bytes) const {
  const uint64_t per_connection =
      static_cast<uint64_t>(bufferedLimit(window_)) * comm.slice_bytes;
  if (per_connection > max_memory_bytes_ - std::min(reserved_bytes_, max_memory_bytes_)) {
    return Status::system("reducer full: a member of communicator " + comm.describe() + " needs " +
                          formatBytesApprox(per_connection) + ", and " +
                          formatBytesApprox(reserved_bytes_) + " of its " +
                          formatBytesApprox(max_memory_bytes_) + " are held by " +
                          std::to_string(comms_.size()) + " communicators");
  }
  *bytes = per_connection;
  return Status::ok();
}

Status CommunicatorRegistry::addMember(const std::shared_ptr<Member>& peer,
                                       const wire::Hello& hello,
                                       std::shared_ptr<Communicator>* comm_out, bool* created,
                                       std::vector<std::shared_ptr<Member>>* ready_to,
                                       bool* over_limit, uint64_t* reserved) {
  std::lock_guard<std::mutex> lock(mu_);
  if (max_members_ > 0 && members_ >= max_members_) {
    *over_limit = true;
    return Status::system("reducer full: " + std::to_string(members_) +
                          " connections are members of communicators, its limit "
                          "(--max-connections)");
  }
  auto it = comms_.find(hello.comm);
  if (it == comms_.end()) {
    uint64_t reserve = 0;
    Status admitted = admitLocked(hello, &reserve);
    if (!admitted.isOk()) {
      *over_limit = true;
      return admitted;
    }
    it =
        comms_.emplace(hello.comm, std::make_shared<Communicator>(hello, engine_, observer_)).first;
    it->second->reserved_bytes = reserve;
    reserved_bytes_ += reserve;
    *reserved = reserve;
    *created = true;
    TALLY_INFO(log::kColl, "reducer: communicator %s forming, %u ranks",
               hello.comm.toString().c_str(), hello.nranks);
  }
  Communicator* comm = it->second.get();
  *comm_out = it->second;
  std::lock_guard<std::mutex> clock(comm->mu_);
  const std::string who =
      "rank " + std::to_string(hello.rank) + " of communicator " + hello.comm.toString();
  if (comm->failed()) return Status::remote(who + ": the communicator has already failed");
  if (comm->formed_) return Status::remote(who + ": the communicator is already complete");
  if (hello.nranks != comm->nranks) {
    return Status::invalidUsage(who + " says " + std::to_string(hello.nranks) +
                                " ranks, earlier members said " + std::to_string(comm->nranks));
  }
  if (hello.nreducers != comm->nreducers || hello.reducer_index != comm->reducer_index) {
    return Status::invalidUsage(
        who + " sees this reducer as number " + std::to_string(hello.reducer_index) + " of " +
        std::to_string(hello.nreducers) + ", earlier members as " +
        std::to_string(comm->reducer_index) + " of " + std::to_string(comm->nreducers));
  }
  if (hello.slice_bytes != comm->slice_bytes) {
    return Status::invalidUsage(who + " uses " + std::to_string(hello.slice_bytes) +
                                "-byte slices, earlier members " +
                                std::to_string(comm->slice_bytes));
  }
  if (hello.slices_per_reducer != comm->plan.per_reducer ||
      hello.min_slice_bytes != comm->plan.min_slice_bytes) {
    return Status::invalidUsage(
        who + " cuts calls into at least " + std::to_string(hello.slices_per_reducer) +
        " slices per reducer of at least " + std::to_string(hello.min_slice_bytes) +
        " bytes, earlier members " + std::to_string(comm->plan.per_reducer) + " of " +
        std::to_string(comm->plan.min_slice_bytes) +
        " (TALLY_SLICES_PER_REDUCER and TALLY_MIN_SLICE_BYTES, or the link speed they follow, "
        "differ between hosts)");
  }
  if (hello.checksum != comm->checksum) {
    return Status::invalidUsage(who + " has TALLY_CHECKSUM=" + (hello.checksum ? "1" : "0") +
                                ", earlier members " + (comm->checksum ? "1" : "0"));
  }
  if (hello.epoch != comm->epoch) {
    // The ranks join a reducer at one membership change, decided by rank 0 for all of them.
    return Status::invalidUsage(who + " joins at epoch " + std::to_string(hello.epoch) +
                                ", earlier members at epoch " + std::to_string(comm->epoch));
  }
  if (comm->members_[hello.rank]) {
    return Status::invalidUsage(who + " joined twice (first from " +
                                comm->members_[hello.rank]->name() + ")");
  }
  if (!*created) {
    uint64_t reserve = 0;
    Status admitted = admitMemberLocked(*comm, &reserve);
    if (!admitted.isOk()) {
      *over_limit = true;
      return admitted;
    }
    comm->reserved_bytes += reserve;
    reserved_bytes_ += reserve;
    *reserved = reserve;
  }
  comm->members_[hello.rank] = peer;
  comm->open_[hello.rank] = true;
  members_++;
  comm->joined_++;
  comm->open_count_++;
  if (comm->joined_ == comm->nranks) {
    comm->formed_.store(true, std::memory_order_release);
    *ready_to = comm->members_;
  }
  return Status::ok();
}

Status CommunicatorRegistry::join(const std::shared_ptr<Member>& peer, const wire::Hello& hello,
                                  std::shared_ptr<Communicator>* out, bool* over_limit) {
  std::vector<std::shared_ptr<Member>> ready_to;
  std::shared_ptr<Communicator> comm;
  bool created = false;
  uint64_t reserved = 0;
  *over_limit = false;
  Status st = addMember(peer, hello, &comm, &created, &ready_to, over_limit, &reserved);
  // Outside the locks. The creating Hello always becomes a member (a fresh communicator has
  // nothing to contradict), so no leave can close the communicator before this is reported.
  // A reservation is reported before its release can be: only the last leave releases, after
  // this member's own leave.
  if (created) observer_->communicatorOpened();
  if (reserved > 0) observer_->memoryReserved(reserved);
  // A member the memory left cannot hold: the communicator can never form, so its other members
  // hear why now rather than at the join timeout.
  if (!st.isOk() && *over_limit && comm && !created) comm->fail(st.message());
  TALLY_RETURN_IF_ERROR(st);
  *out = comm;
  if (!ready_to.empty()) {
    TALLY_INFO(log::kColl, "reducer: communicator %s ready", comm->describe().c_str());
    wire::Ready ready;
    ready.comm = comm->id;
    ready.nranks = comm->nranks;
    ready.window = static_cast<uint32_t>(window_);
    if (comm->epoch > 0) {
      // A reducer taken into a running communicator (a restarted one, or a spare). Counted
      // before any rank can have its Ready, so a worker that has it sees it counted.
      TALLY_INFO(log::kColl, "reducer: communicator %s joined at epoch %u",
                 comm->describe().c_str(), comm->epoch);
      observer_->communicatorRejoined();
    }
    const wire::Frame frame = wire::encodeReady(ready);
    for (auto& p : ready_to) {
      OutMsg m;
      m.header = frame;
      p->send(std::move(m));
    }
  }
  return Status::ok();
}

void CommunicatorRegistry::leave(const std::shared_ptr<Communicator>& comm, int rank, bool graceful,
                                 const std::string& why, wire::ErrorScope scope) {
  bool fail_now = false;
  bool check_waiting = false;  // a Bye: does a slice of the others wait for this rank's input?
  bool last = false;
  bool forgotten = false;
  uint64_t released = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::lock_guard<std::mutex> clock(comm->mu_);
    if (rank >= 0 && static_cast<uint32_t>(rank) < comm->open_.size() && comm->open_[rank]) {
      comm->open_[rank] = false;
      comm->open_count_--;
      members_--;
      if (graceful) {
        comm->markLeftLocked(static_cast<uint32_t>(rank), why);
        check_waiting = comm->open_count_ > 0;
      }
    }
    fail_now = !graceful && !comm->failed();
    if (comm->open_count_ == 0) {
      last = true;
      auto it = comms_.find(comm->id);
      if (it != comms_.end() && it->second == comm) {
        comms_.erase(it);
        reserved_bytes_ -= comm->reserved_bytes;
        released = comm->reserved_bytes;
        forgotten = true;
      }
      comm->members_.clear();  // breaks the Peer <-> Communicator cycle
    }
  }
  if (fail_now) comm->fail(why, scope);
  // In a normal teardown every rank says Bye once all its calls are done, and every call a rank
  // completed had every input: nothing waits, and nothing fails. A slice that does wait is a call
  // the leaving rank never posted, and the others hear so now rather than at their timeout. A
  // slice filed after this is the engine's to fail (anyLeft).
  wire::SliceHeader waiting;
  if (check_waiting && !comm->failed() &&
      engine_->awaits(*comm, static_cast<uint32_t>(rank), &waiting)) {
    comm->fail(why + ": " + wire::describeSlice(waiting) + " waits for its input");
  }
  if (released > 0) observer_->memoryReleased(released);
  if (forgotten) observer_->communicatorClosed();
  if (last) {
    TALLY_INFO(log::kColl, "reducer: communicator %s closed", comm->describe().c_str());
    engine_->dropCommunicator(comm);
  }
}

void CommunicatorRegistry::clear() {
  std::unordered_map<wire::CommId, std::shared_ptr<Communicator>, wire::CommIdHash> comms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    comms.swap(comms_);
    reserved_bytes_ = 0;
    members_ = 0;
  }
  for (auto& [id, comm] : comms) {
    {
      std::lock_guard<std::mutex> clock(comm->mu_);
      comm->members_.clear();
    }
    // Out of the registry, so nothing changes it any more.
    if (comm->reserved_bytes > 0) observer_->memoryReleased(comm->reserved_bytes);
    observer_->communicatorClosed();
  }
}

size_t CommunicatorRegistry::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return comms_.size();
}

}  // namespace tally::reducer::server
