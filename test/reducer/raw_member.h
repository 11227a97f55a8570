// SPDX-License-Identifier: Apache-2.0
// Workers played by raw sockets for the failover tests (failover_test.cc, relay_test.cc): each
// joins a communicator over one socket (an event loop serves it) or two (a reader and a writer
// thread), then speaks the wire itself, so a test can send any failover message at any moment and
// see exactly what the reducer sends back, in order.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/fd.h"
#include "protocol/wire.h"
#include "reducer/server.h"
#include "test/support/counting_observer.h"
#include "test/support/raw_streams.h"
#include "transport/raw_stream.h"

namespace tally::reducer::test {

inline constexpr uint64_t kMemberSliceBytes = 4096;
inline constexpr uint64_t kMemberCommHi = 0xfa110e7;

// One message as received on stream 0.
struct Received {
  wire::MsgType type{};
  std::array<uint8_t, wire::kMaxHeaderBytes> bytes{};
  size_t size = 0;
};

// A member's Hello: one reducer, 4 KiB slices, window 2.
inline wire::Hello memberHello(uint64_t comm, uint32_t rank, uint32_t nranks, uint32_t epoch = 0) {
  wire::Hello h;
  h.comm = wire::CommId{kMemberCommHi, comm};
  h.rank = rank;
  h.nranks = nranks;
  h.nreducers = 1;
  h.slice_bytes = kMemberSliceBytes;
  h.min_slice_bytes = kMemberSliceBytes;
  h.window = 2;
  h.epoch = epoch;
  return h;
}

class RawMember {
 public:
  RawMember(const std::string& address, int streams, uint64_t id)
      : fds_(connectStreams(address, streams, id)) {}
  bool valid() const { return !fds_.empty(); }
  int fd() const { return fds_[0].get(); }

  Status send(const wire::Frame& f) { return sendMsg(fd(), f); }
  // The next message, whatever it is.
  Status next(Received* m, int64_t timeout_ms = kRawWaitMs) {
    TALLY_RETURN_IF_ERROR(transport::recvFrame(fd(), wire::kTagHeader, m->bytes.data(),
                                               m->bytes.size(), &m->size, timeout_ms, "reducer"));
    return wire::peekType(m->bytes.data(), m->size, &m->type);
  }
  // The next message, which must be of type `want`; ok once it is.
  Status expect(wire::MsgType want, Received* m) {
    TALLY_RETURN_IF_ERROR(next(m));
    if (m->type != want) {
      return Status::internal(std::string("test: got ") + wire::msgTypeName(m->type) +
                              ", expected " + wire::msgTypeName(want));
    }
    return Status::ok();
  }
  // Nothing at all arrives (not even a close) within `ms`.
  bool quietFor(int ms) {
    pollfd p{fd(), POLLIN, 0};
    return ::poll(&p, 1, ms) == 0;
  }
  // The reducer closes the connection: EOF (or a reset) with nothing before it, within the wait.
  bool closedByReducer() {
    Received m;
    return !next(&m).isOk() && m.size == 0;
  }
  // A Ping with `token`, and its Pong as the next message: everything this member sent before
  // has been handled by the reducer when this returns ok.
  Status sync(uint64_t token) {
    TALLY_RETURN_IF_ERROR(send(wire::encodePing(wire::Ping{token})));
    Received m;
    TALLY_RETURN_IF_ERROR(expect(wire::MsgType::kPong, &m));
    wire::Ping pong;
    TALLY_RETURN_IF_ERROR(wire::decodePong(m.bytes.data(), m.size, &pong));
    if (pong.token != token) return Status::internal("test: a Pong with another token");
    return Status::ok();
  }
  void close() { fds_.clear(); }

 private:
  std::vector<Fd> fds_;
};

// Every member's Ready, the next message each gets; false (and a test failure) at the first
// that does not come.
inline bool awaitReady(const std::vector<std::unique_ptr<RawMember>>& members) {
  for (auto& m : members) {
    Received ready;
    Status st = m->expect(wire::MsgType::kReady, &ready);
    EXPECT_TRUE(st.isOk()) << st.toString();
    if (!st.isOk()) return false;
  }
  return true;
}

// One all-reduce of a single slice (1024 float32, call `seq`): rank r sends r + 1 everywhere,
// and every rank must get exactly the sum back.
inline void expectSum(const std::vector<std::unique_ptr<RawMember>>& members, uint64_t seq) {
  wire::SliceHeader h;
  h.seq = seq;
  h.count = kMemberSliceBytes / sizeof(float);
  h.total_count = h.count;
  for (size_t r = 0; r < members.size(); ++r) {
    std::vector<float> in(h.count, static_cast<float>(r + 1));
    ASSERT_TRUE(members[r]->send(wire::encodeSlice(h)).isOk());
    ASSERT_TRUE(transport::sendFrame(members[r]->fd(), wire::kTagPayload, in.data(),
                                     kMemberSliceBytes, kRawWaitMs, "reducer")
                    .isOk());
  }
  const float want = static_cast<float>(members.size() * (members.size() + 1) / 2);
  for (size_t r = 0; r < members.size(); ++r) {
    Received m;
    Status st = members[r]->expect(wire::MsgType::kResult, &m);
    ASSERT_TRUE(st.isOk()) << "rank " << r << ": " << st.toString();
    wire::SliceHeader result;
    ASSERT_TRUE(wire::decodeResult(m.bytes.data(), m.size, &result).isOk());
    EXPECT_EQ(result.seq, seq);
    std::vector<float> out(h.count);
    size_t got = 0;
    ASSERT_TRUE(transport::recvFrame(members[r]->fd(), wire::kTagPayload, out.data(),
                                     kMemberSliceBytes, &got, kRawWaitMs, "reducer")
                    .isOk());
    ASSERT_EQ(got, kMemberSliceBytes);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(out[i], want) << "rank " << r << " at " << i;
  }
}

// The server and its observer, over the event loop (1 stream) or threads (2).
class MemberTest : public ::testing::TestWithParam<int> {
 protected:
  int streams() const { return GetParam(); }

  void startServer(ServerOptions o = {}) {
    o.listen = "127.0.0.1:0";
    o.threads = 2;
    o.observer = &observer_;
    Status st = ReducerServer::start(o, &server_);
    ASSERT_TRUE(st.isOk()) << st.toString();
  }

  // A member that read its Challenge and sent its Hello.
  std::unique_ptr<RawMember> open(const wire::Hello& hello) {
    auto m = std::make_unique<RawMember>(server_->address(), streams(), next_id_++);
    EXPECT_TRUE(m->valid());
    if (!m->valid()) return nullptr;
    Received challenge;
    EXPECT_TRUE(m->expect(wire::MsgType::kChallenge, &challenge).isOk());
    EXPECT_TRUE(m->send(wire::encodeHello(hello)).isOk());
    return m;
  }

  // `nranks` members of communicator `comm`, each of which has its Ready.
  std::vector<std::unique_ptr<RawMember>> join(uint64_t comm, uint32_t nranks, uint32_t epoch = 0) {
    std::vector<std::unique_ptr<RawMember>> members;
    for (uint32_t r = 0; r < nranks; ++r) {
      members.push_back(open(memberHello(comm, r, nranks, epoch)));
      if (!members.back()) return {};
    }
    if (!awaitReady(members)) return {};
    return members;
  }

  // The Error a member gets next (skipping nothing: it must be the next message).
  struct ErrorSeen {
    std::string reason;
    wire::ErrorScope scope = wire::ErrorScope::kCommunicator;
  };
  ErrorSeen awaitError(RawMember& m) {
    ErrorSeen e;
    Received got;
    Status st = m.expect(wire::MsgType::kError, &got);
    EXPECT_TRUE(st.isOk()) << st.toString();
    if (!st.isOk()) return e;
    wire::Reason reason;
    EXPECT_TRUE(wire::decodeError(got.bytes.data(), got.size, &reason, &e.scope).isOk());
    e.reason = reason.text;
    return e;
  }

  CountingObserver observer_;  // outlives the server
  std::unique_ptr<ReducerServer> server_;
  uint64_t next_id_ = 1;
};

inline std::string servedName(const ::testing::TestParamInfo<int>& param) {
  return param.param == 1 ? "EventLoop" : "Threads";
}

}  // namespace tally::reducer::test
