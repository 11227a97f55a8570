// The state of the software device of verbs_fake.h, shared by its two files: objects
// (verbs_fake.cc) and data movement (verbs_fake_wire.cc). Everything is guarded by g_mu.
#pragma once

#include <infiniband/verbs.h>

#include <deque>
#include <map>
#include <mutex>

#include "test/transport/verbs_fake.h"

namespace tally::transport::test::fake {

struct FakeWc {
  ibv_wc wc{};
  bool is_send = false;
};

struct FakeCq {
  ibv_cq base{};
  std::deque<FakeWc> queue;
  bool armed = false;
};

struct RecvWr {
  uint64_t wr_id = 0;
  bool has_sge = false;
  ibv_sge sge{};
};

struct Packet {
  ibv_send_wr wr{};
  ibv_sge sge{};
  bool has_sge = false;
  uint32_t src_qp = 0;
};

struct FakeQp {
  ibv_qp base{};
  ibv_qp_cap cap{};
  int send_outstanding = 0;
  uint32_t dest_qp = 0;
  std::deque<RecvWr> recvs;
  std::deque<Packet> pending;  // waiting for RTR or for a receive, in order
};

inline std::mutex g_mu;
inline FakeVerbsConfig g_config;
inline FakeVerbsStats g_stats;
inline ibv_device g_device{};
inline uint32_t g_next_qp = 0x100;
inline uint32_t g_next_key = 0x1000;
inline std::map<uint32_t, FakeQp*> g_qps;
inline std::map<uint32_t, ibv_mr*> g_mrs;  // by lkey (rkey = lkey + 1)
inline std::map<ibv_comp_channel*, FakeCq*> g_channel_cq;

inline FakeCq* fakeCq(ibv_cq* cq) { return reinterpret_cast<FakeCq*>(cq); }
inline FakeQp* fakeQp(ibv_qp* qp) { return reinterpret_cast<FakeQp*>(qp); }

// Data movement (verbs_fake_wire.cc); the *Locked ones expect g_mu held.
void flushLocked(FakeQp* qp);
void failPendingLocked(FakeQp* dest);
void deliverLocked(FakeQp* dest);
int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int pollCq(ibv_cq* cq, int n, ibv_wc* out);
int reqNotifyCq(ibv_cq* cq, int solicited_only);

}  // namespace tally::transport::test::fake
