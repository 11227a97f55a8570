// SPDX-License-Identifier: Apache-2.0
// The state of the software device of verbs_fake.h, shared by its files: objects
// (verbs_fake.cc), memory regions (verbs_fake_memory.cc) and data movement (verbs_fake_wire.cc).
// Everything is guarded by g_mu.
#pragma once

#include <infiniband/verbs.h>

#include <deque>
#include <map>
#include <mutex>
#include <vector>

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

// A memory region: the device addresses it from `iova`, the bytes are at `host` in this process
// (the same for ibv_reg_mr; a mapping of the fd for a dma-buf).
struct FakeMr {
  ibv_mr base{};
  int access = 0;
  uint64_t iova = 0;
  uint8_t* host = nullptr;
  void* map = nullptr;  // a dma-buf's mapping, unmapped with the region
  size_t map_length = 0;
};

struct FakeQp {
  ibv_qp base{};
  ibv_qp_cap cap{};
  unsigned access = 0;  // qp_access_flags from the move to INIT
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
inline std::map<uint32_t, FakeMr*> g_mrs;  // by lkey (rkey = lkey + 1)
inline std::vector<FakeDmaBufRegistration> g_dmabuf_regs;
inline std::vector<uint64_t> g_read_addrs;
inline std::map<ibv_comp_channel*, FakeCq*> g_channel_cq;

inline FakeCq* fakeCq(ibv_cq* cq) { return reinterpret_cast<FakeCq*>(cq); }
inline FakeQp* fakeQp(ibv_qp* qp) { return reinterpret_cast<FakeQp*>(qp); }

// Memory regions (verbs_fake_memory.cc).
ibv_mr* regMr(ibv_pd* pd, void* addr, size_t length, int access);
ibv_mr* regDmaBufMr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
int deregMr(ibv_mr* mr);
// Where [addr, addr+length) under `key` (an rkey when `remote`) is in this process, when the
// region exists, covers it and grants every right in `access`; null when a device would refuse.
uint8_t* checkLocked(uint32_t key, bool remote, uint64_t addr, uint64_t length, int access);

// Data movement (verbs_fake_wire.cc); the *Locked ones expect g_mu held.
void flushLocked(FakeQp* qp);
void failPendingLocked(FakeQp* dest);
void deliverLocked(FakeQp* dest);
int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int pollCq(ibv_cq* cq, int n, ibv_wc* out);
int reqNotifyCq(ibv_cq* cq, int solicited_only);

}  // namespace tally::transport::test::fake
