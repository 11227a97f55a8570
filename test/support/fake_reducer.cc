// SPDX-License-Identifier: Apache-2.0
#include "test/support/fake_reducer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>

#include "common/auth.h"
#include "protocol/opening.h"

namespace tally::reducer::test {

namespace {

// How long a wait for one message step may run before the stop flag is looked at again.
constexpr int64_t kStepMs = 50;
// How long the opening (a connection's Hello) may take.
constexpr int64_t kOpeningMs = 20000;

std::vector<uint8_t> bytesOf(const wire::Frame& f) {
  return std::vector<uint8_t>(f.data(), f.data() + f.size);
}

wire::Relay relayOf(uint32_t from, wire::ControlKind kind, wire::Change change, uint32_t epoch,
                    uint32_t slot) {
  wire::Relay r;
  r.from = from;
  r.control.kind = kind;
  r.control.change = change;
  r.control.epoch = epoch;
  r.control.slot = slot;
  r.control.next_call = 0;
  r.control.address = "forged.invalid:1";
  r.control.reason = "forged by the test's fake reducer";
  return r;
}

}  // namespace

std::vector<wire::Relay> FakeReducer::forgedRelays(uint32_t slot) {
  using K = wire::ControlKind;
  using C = wire::Change;
  return {
      relayOf(0, K::kDecide, C::kLost, 7, slot),   // rank 0's, from the future
      relayOf(0, K::kPropose, C::kLost, 0, slot),  // rank 0's, stale (the formation's epoch)
      relayOf(0, K::kPropose, C::kLost, 7, slot),  // rank 0's, from the future
      relayOf(0, K::kDecide, C::kFail, 7, slot),   // a failure, from the future
      relayOf(1, K::kPropose, C::kLost, 1, slot),  // the next epoch, but not from rank 0
      relayOf(1, K::kDecide, C::kLost, 1, slot),   // the same for a decision
      relayOf(1, K::kDecide, C::kFail, 1, slot),   // and a failure
      relayOf(1, K::kReport, C::kLost, 7, slot),   // a report on no proposal
  };
}

FakeReducer::FakeReducer(int nranks, const FakeScript& script)
    : nranks_(nranks), script_(script), members_(static_cast<size_t>(nranks)) {}

Status FakeReducer::start(int nranks, const FakeScript& script, std::unique_ptr<FakeReducer>* out) {
  if (nranks < 1) return Status::invalidUsage("test: a fake reducer needs at least one rank");
  std::unique_ptr<FakeReducer> f(new FakeReducer(nranks, script));
  transport::NetworkConfig config;
  TALLY_RETURN_IF_ERROR(transport::openDefaultNetwork(config, &f->network_));
  TALLY_RETURN_IF_ERROR(f->network_->listenAt("127.0.0.1:0", &f->listener_));
  f->address_ = f->listener_->address();
  f->acceptor_ = std::thread([p = f.get()] { p->acceptLoop(); });
  *out = std::move(f);
  return Status::ok();
}

FakeReducer::~FakeReducer() { stop(); }

void FakeReducer::stop() {
  if (stop_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::shared_ptr<Member>> members;
  {
    std::lock_guard<std::mutex> lock(mu_);
    members = members_;
  }
  for (auto& m : members) {
    if (m) endMember(m.get());
  }
  // The acceptor is gone: nothing adds to servers_ any more.
  for (auto& t : servers_) t.join();
  for (auto& m : members_) {
    if (m && m->writer.joinable()) m->writer.join();
  }
  listener_.reset();
}

std::vector<wire::Relay> FakeReducer::relayed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return relayed_;
}

std::vector<wire::Relay> FakeReducer::sentAsAct() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sent_as_act_;
}

void FakeReducer::acceptLoop() {
  while (!stop_.load()) {
    std::unique_ptr<transport::Connection> conn;
    Status st = listener_->acceptWait(kStepMs, &conn);
    if (!st.isOk() || !conn) continue;
    std::lock_guard<std::mutex> lock(mu_);
    servers_.emplace_back([this, c = std::move(conn)]() mutable { serve(std::move(c)); });
  }
}

Status FakeReducer::recvMessage(transport::Connection* conn, void* data, size_t size, int tag,
                                size_t* got) {
  transport::MemoryRegion* mr = nullptr;
  std::unique_ptr<transport::Request> req;
  TALLY_RETURN_IF_ERROR(conn->irecv(1, &data, &size, &tag, &mr, &req));
  if (!req) return Status::internal("test: no room for a receive");
  for (;;) {
    size_t sizes[transport::kMaxRecvs] = {};
    Status st = req->wait(kStepMs, sizes);
    if (st.isOk()) {
      *got = sizes[0];
      return st;
    }
    if (st.code() != StatusCode::kTimeout || stop_.load()) {
      conn->close();  // the pending receive must not outlive an open connection
      return st.code() == StatusCode::kTimeout ? Status::remote("test: stopped") : st;
    }
  }
}

void FakeReducer::serve(std::unique_ptr<transport::Connection> conn) {
  // The opening: a Challenge (asking for the job token when the script has one; then the
  // worker's Answer and this side's Proof), then the worker's Hello.
  const auth::JobToken token(script_.job_token);
  protocol::opening::ReducerSide side;
  Status st = protocol::opening::ReducerSide::start(&token, &side);
  const wire::Frame cf = side.challenge();
  std::unique_ptr<transport::Request> req;
  if (st.isOk()) st = conn->isend(cf.data(), cf.size, wire::kTagHeader, nullptr, &req);
  if (st.isOk() && req) st = req->wait(kOpeningMs, nullptr);
  std::array<uint8_t, wire::kMaxHeaderBytes> buf{};
  size_t got = 0;
  if (st.isOk()) st = recvMessage(conn.get(), buf.data(), buf.size(), wire::kTagHeader, &got);
  wire::Frame proof;
  std::unique_ptr<transport::Request> proof_req;
  if (st.isOk() && side.authRequired()) {
    st = side.checkAnswer(buf.data(), got, &proof);
    if (st.isOk()) st = conn->isend(proof.data(), proof.size, wire::kTagHeader, nullptr, &proof_req);
    if (st.isOk() && proof_req) st = proof_req->wait(kOpeningMs, nullptr);
    if (st.isOk()) st = recvMessage(conn.get(), buf.data(), buf.size(), wire::kTagHeader, &got);
  }
  wire::Hello hello;
  if (st.isOk()) st = wire::decodeHello(buf.data(), got, &hello);
  auto m = std::make_shared<Member>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool fits = st.isOk() && hello.nranks == static_cast<uint32_t>(nranks_) &&
                      hello.rank < hello.nranks && !members_[hello.rank] &&
                      (joined_ == 0 || hello.comm == comm_);
    if (!fits) {
      // A second communicator, a rejoin, or a broken opening: this fake serves one formation.
      conn->close();
      req.reset();
      proof_req.reset();
      return;
    }
    m->rank = static_cast<int>(hello.rank);
    m->conn = std::move(conn);
    m->writer = std::thread([this, p = m.get()] { writeLoop(p); });
    members_[hello.rank] = m;
    comm_ = hello.comm;
    if (++joined_ == nranks_) {
      // Every rank said Hello: Ready to each, before anything else reaches any of them.
      wire::Ready ready;
      ready.comm = comm_;
      ready.nranks = static_cast<uint32_t>(nranks_);
      ready.window = script_.window;
      for (auto& each : members_) sendHeader(each.get(), wire::encodeReady(ready));
    }
  }
  req.reset();  // the Challenge (and the Proof) went out, or the connection is closed
  proof_req.reset();
  (void)readLoop(m.get());
  endMember(m.get());
}

Status FakeReducer::readLoop(Member* m) {
  std::array<uint8_t, wire::kMaxHeaderBytes> buf{};
  for (;;) {
    size_t got = 0;
    TALLY_RETURN_IF_ERROR(
        recvMessage(m->conn.get(), buf.data(), buf.size(), wire::kTagHeader, &got));
    wire::MsgType type;
    TALLY_RETURN_IF_ERROR(wire::peekType(buf.data(), got, &type));
    switch (type) {
      case wire::MsgType::kSlice: {
        wire::SliceHeader h;
        TALLY_RETURN_IF_ERROR(wire::decodeSlice(buf.data(), got, &h));
        // The sender's Ack may come along with the slice (wire.h SliceHeader::ack).
        if (h.ack.calls != 0 || h.ack.recovery_epoch != 0) onAck(m->rank, h.ack);
        std::vector<uint8_t> payload(h.payloadBytes());
        if (!payload.empty()) {
          size_t bytes = 0;
          TALLY_RETURN_IF_ERROR(recvMessage(m->conn.get(), payload.data(), payload.size(),
                                            wire::kTagPayload, &bytes));
          if (bytes != payload.size()) return Status::remote("test: a short slice payload");
        }
        onSlice(m->rank, h, std::move(payload));
        break;
      }
      case wire::MsgType::kAck: {
        wire::AckPoint p;
        TALLY_RETURN_IF_ERROR(wire::decodeAck(buf.data(), got, &p));
        onAck(m->rank, p);
        break;
      }
      case wire::MsgType::kPing: {
        wire::Ping ping;
        TALLY_RETURN_IF_ERROR(wire::decodePing(buf.data(), got, &ping));
        pings_.fetch_add(1);
        sendHeader(m, wire::encodePong(ping));
        break;
      }
      case wire::MsgType::kRelay: {
        wire::Relay relay;
        TALLY_RETURN_IF_ERROR(wire::decodeRelay(buf.data(), got, &relay));
        onRelay(m->rank, std::move(relay));
        break;
      }
      default:
        // Dismiss, Bye, Error or anything else: this rank is done with this reducer.
        return Status::ok();
    }
  }
}

void FakeReducer::writeLoop(Member* m) {
  writeQueued(m);
  {
    std::lock_guard<std::mutex> lock(m->mu);
    m->writer_done = true;
  }
  m->cv.notify_all();
}

void FakeReducer::writeQueued(Member* m) {
  for (;;) {
    Out out;
    {
      std::unique_lock<std::mutex> lock(m->mu);
      m->cv.wait(lock, [&] { return stop_.load() || m->closed || !m->queue.empty(); });
      if (stop_.load() || m->closed) return;
      out = std::move(m->queue.front());
      m->queue.pop_front();
    }
    std::unique_ptr<transport::Request> req;
    Status st;
    for (;;) {
      st = m->conn->isend(out.bytes.data(), out.bytes.size(), out.tag, nullptr, &req);
      if (!st.isOk() || req || stop_.load()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Until it is sent, or fails, or the fake stops (kTimeout: not done yet).
    while (st.isOk() && req) {
      st = req->wait(kStepMs, nullptr);
      if (st.isOk() || st.code() != StatusCode::kTimeout || stop_.load()) break;
      st = Status::ok();
    }
    if (!st.isOk() || !req) {
      m->conn->close();  // before the pending send goes
      return;
    }
    {
      std::lock_guard<std::mutex> lock(m->mu);
      ++m->sent;
    }
    m->cv.notify_all();
  }
}

void FakeReducer::send(Member* m, std::vector<Out> msgs) {
  if (m == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (m->closed) return;
    for (Out& o : msgs) m->queue.push_back(std::move(o));
    m->queued += msgs.size();
  }
  m->cv.notify_all();
}

void FakeReducer::sendHeader(Member* m, const wire::Frame& f) {
  std::vector<Out> msgs(1);
  msgs[0].bytes = bytesOf(f);
  send(m, std::move(msgs));
}

void FakeReducer::endMember(Member* m) {
  {
    std::lock_guard<std::mutex> lock(m->mu);
    if (m->closed) return;
    m->closed = true;
  }
  m->cv.notify_all();
  m->conn->close();
  gone_.fetch_add(1);
}

void FakeReducer::sendResult(Member* m, const wire::SliceHeader& h,
                             const std::vector<uint8_t>& payload) {
  std::vector<Out> msgs(payload.empty() ? 1 : 2);
  msgs[0].bytes = bytesOf(wire::encodeResult(h));
  if (!payload.empty()) {
    msgs[1].tag = wire::kTagPayload;
    msgs[1].bytes = payload;
  }
  send(m, std::move(msgs));
}

void FakeReducer::onSlice(int rank, const wire::SliceHeader& h, std::vector<uint8_t> payload) {
  if (acted_.load()) copies_after_act_.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  Pending& p = pending_[{h.seq, h.slice}];
  if (p.inputs.empty()) {
    p.header = h;
    p.inputs.resize(static_cast<size_t>(nranks_));
  }
  if (p.seen.empty()) p.seen.assign(static_cast<size_t>(nranks_), false);
  if (p.seen[rank]) return;  // a second copy from one rank: not this fake's concern
  p.seen[rank] = true;
  p.inputs[rank] = std::move(payload);
  if (++p.have < nranks_) return;
  Pending done = std::move(p);
  pending_.erase({h.seq, h.slice});
  answer(std::move(done));
}

Status FakeReducer::sum(const Pending& p, std::vector<uint8_t>* out) const {
  const wire::SliceHeader& h = p.header;
  if (h.op != ReduceOp::kSum) return Status::internal("test: the fake sums only");
  const size_t bytes = h.payloadBytes();
  for (const auto& in : p.inputs) {
    if (in.size() != bytes) return Status::internal("test: copies of a slice differ in size");
  }
  out->assign(bytes, 0);
  const size_t n = static_cast<size_t>(h.count);
  switch (h.type) {
    case DataType::kFloat32:
      for (size_t i = 0; i < n; ++i) {
        float acc = 0;
        for (size_t r = 0; r < p.inputs.size(); ++r) {
          float x;
          std::memcpy(&x, p.inputs[r].data() + i * sizeof(x), sizeof(x));
          acc = r == 0 ? x : acc + x;  // in rank order
        }
        std::memcpy(out->data() + i * sizeof(acc), &acc, sizeof(acc));
      }
      return Status::ok();
    case DataType::kInt32:
      for (size_t i = 0; i < n; ++i) {
        uint32_t acc = 0;  // wraps like the reducer's two's-complement sum
        for (const auto& in : p.inputs) {
          uint32_t x;
          std::memcpy(&x, in.data() + i * sizeof(x), sizeof(x));
          acc += x;
        }
        std::memcpy(out->data() + i * sizeof(acc), &acc, sizeof(acc));
      }
      return Status::ok();
    default:
      return Status::internal("test: the fake sums float32 and int32 only");
  }
}

std::vector<FakeReducer::Member*> FakeReducer::liveMembers() {
  std::vector<Member*> live;
  for (auto& m : members_) {
    if (!m) continue;
    std::lock_guard<std::mutex> lock(m->mu);
    if (!m->closed) live.push_back(m.get());
  }
  return live;
}

void FakeReducer::answer(Pending p) {
  // mu_ is held: every rank's queue gets results, Commits and relays in one order.
  std::vector<uint8_t> result;
  Status st = sum(p, &result);
  if (!st.isOk()) {
    if (trouble_.empty()) trouble_ = st.message();
    return;
  }
  wire::SliceHeader h = p.header;
  h.crc = 0;
  h.ack = wire::AckPoint{};  // the first sender's Ack; this fake sends its Commits on their own
  bool act = false;
  if (!acted_.load()) {
    if (script_.act == Misbehaviour::kReplayControl) {
      act =
          decided_ && h.seq >= decided_boundary_ && ++summed_past_boundary_ > script_.after_slices;
    } else {
      act = script_.act != Misbehaviour::kNone && summed_.load() >= script_.after_slices;
    }
  } else {
    summed_after_act_.fetch_add(1);
  }
  summed_.fetch_add(1);
  const std::vector<Member*> live = liveMembers();
  if (!act) {
    for (Member* m : live) sendResult(m, h, result);
    return;
  }
  acted_.store(true);
  switch (script_.act) {
    case Misbehaviour::kStrayResult: {
      // The next slice of the same call (another reducer's: placement rotates over the slots),
      // or, after the last slice, an index the call does not have; either way not in this
      // rank's books for this reducer.
      wire::SliceHeader stray = h;
      stray.slice = h.slice + 1;
      if (h.offset + h.count < h.total_count) {
        stray.offset = h.offset + h.count;
        stray.count = std::min(h.count, h.total_count - stray.offset);
      }
      const std::vector<uint8_t> zeros(stray.payloadBytes(), 0);
      for (Member* m : live) {
        if (aimedAt(m->rank)) sendResult(m, stray, zeros);
        sendResult(m, h, result);
      }
      return;
    }
    case Misbehaviour::kEarlyCommit:
      for (Member* m : live) {
        if (aimedAt(m->rank)) {
          sendHeader(m, wire::encodeCommit(wire::AckPoint{h.seq + 1, committed_.recovery_epoch}));
        }
        sendResult(m, h, result);
      }
      return;
    case Misbehaviour::kGarbage:
      for (Member* m : live) {
        if (!aimedAt(m->rank)) {
          sendResult(m, h, result);
          continue;
        }
        std::vector<Out> junk(1);
        junk[0].bytes.assign(40, 0xa5);  // no magic, no version, no type
        send(m, std::move(junk));
      }
      return;
    case Misbehaviour::kForgeControl:
    case Misbehaviour::kReplayControl: {
      for (Member* m : live) sendResult(m, h, result);
      sent_as_act_ = script_.act == Misbehaviour::kForgeControl ? forgedRelays(0) : relayed_;
      for (Member* m : live) {
        for (const wire::Relay& r : sent_as_act_) sendHeader(m, wire::encodeRelay(r));
      }
      return;
    }
    case Misbehaviour::kCrashBeforeCommit: {
      // The results go to the ranks aimed at (every rank, or one only: partial delivery).
      for (Member* m : live) {
        if (aimedAt(m->rank)) sendResult(m, h, result);
      }
      // Every result out (bounded), then every connection gone, before any Commit for them.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      for (Member* m : live) {
        std::unique_lock<std::mutex> lock(m->mu);
        m->cv.wait_until(lock, deadline, [m] { return m->closed || m->sent == m->queued; });
      }
      // Time for every rank to read its result (a close with the ranks' later slices unread
      // resets the connection, and a reset can drop what the rank had not read yet).
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      for (Member* m : live) endMember(m);
      return;
    }
    case Misbehaviour::kNone:
      break;
  }
}

void FakeReducer::onAck(int rank, const wire::AckPoint& p) {
  std::lock_guard<std::mutex> lock(mu_);
  if (script_.act == Misbehaviour::kCrashBeforeCommit && acted_.load()) return;
  Member* me = members_[rank].get();
  me->acked.calls = std::max(me->acked.calls, p.calls);
  me->acked.recovery_epoch = std::max(me->acked.recovery_epoch, p.recovery_epoch);
  wire::AckPoint least{UINT64_MAX, UINT32_MAX};
  for (auto& m : members_) {
    if (!m) return;  // not every rank joined: no result went out yet
    least.calls = std::min(least.calls, m->acked.calls);
    least.recovery_epoch = std::min(least.recovery_epoch, m->acked.recovery_epoch);
  }
  if (least.calls <= committed_.calls && least.recovery_epoch <= committed_.recovery_epoch) return;
  committed_.calls = std::max(committed_.calls, least.calls);
  committed_.recovery_epoch = std::max(committed_.recovery_epoch, least.recovery_epoch);
  const wire::Frame f = wire::encodeCommit(committed_);
  for (Member* m : liveMembers()) sendHeader(m, f);
}

void FakeReducer::onRelay(int rank, wire::Relay relay) {
  std::lock_guard<std::mutex> lock(mu_);
  relay.from = static_cast<uint32_t>(rank);  // whoever's connection it came on
  relayed_.push_back(relay);
  if (rank == 0 && relay.control.kind == wire::ControlKind::kDecide && relay.control.epoch > 0) {
    decided_ = true;
    decided_boundary_ = std::max(decided_boundary_, relay.control.next_call);
  }
  if (!script_.relays) return;
  const wire::Frame f = wire::encodeRelay(relay);
  for (Member* m : liveMembers()) {
    const bool wanted = rank == 0 ? m->rank != 0 : m->rank == 0;
    if (wanted) sendHeader(m, f);
  }
}

bool FakeReducer::inject(int rank, const wire::Frame& frame, int copies) {
  std::shared_ptr<Member> m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (rank < 0 || rank >= nranks_ || !members_[rank]) return false;
    m = members_[rank];
    for (int i = 0; i < copies; ++i) sendHeader(m.get(), frame);
  }
  std::unique_lock<std::mutex> lock(m->mu);
  const uint64_t mine = m->queued;
  // Not `closed`: the worker may close as soon as it reads the frame, before the writer counts
  // it sent, so wait for the writer itself.
  m->cv.wait_for(lock, std::chrono::seconds(5), [&] { return m->writer_done || m->sent >= mine; });
  return m->sent >= mine;
}

std::string FakeReducer::trouble() const {
  std::lock_guard<std::mutex> lock(mu_);
  return trouble_;
}

}  // namespace tally::reducer::test
