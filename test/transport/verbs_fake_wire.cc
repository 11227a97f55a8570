// SPDX-License-Identifier: Apache-2.0
// The software device's data movement: work requests, delivery in order per queue pair, and
// completion queues (see verbs_fake.h).
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "test/transport/verbs_fake_internal.h"

namespace tally::transport::test::fake {
namespace {

void pushLocked(ibv_cq* cq, const ibv_wc& wc, bool is_send) {
  FakeCq* fake = fakeCq(cq);
  if (static_cast<int>(fake->queue.size()) >= fake->base.cqe) {
    ++g_stats.cq_overflows;
    return;
  }
  fake->queue.push_back({wc, is_send});
  if (fake->armed && fake->base.channel != nullptr) {
    fake->armed = false;
    g_channel_cq[fake->base.channel] = fake;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(fake->base.channel->fd, &one, sizeof(one));
  }
}

// The send queue slot is held until the completion is polled, as on real devices; an unsignaled
// success frees it at once.
void completeSendLocked(FakeQp* src, const Packet& p, ibv_wc_status status) {
  if ((p.wr.send_flags & IBV_SEND_SIGNALED) == 0 && status == IBV_WC_SUCCESS) {
    --src->send_outstanding;
    return;
  }
  ibv_wc wc{};
  wc.wr_id = p.wr.wr_id;
  wc.status = status;
  wc.opcode = p.wr.opcode == IBV_WR_SEND        ? IBV_WC_SEND
              : p.wr.opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
                                                : IBV_WC_RDMA_WRITE;
  if (p.wr.opcode == IBV_WR_RDMA_READ && status == IBV_WC_SUCCESS) wc.byte_len = p.sge.length;
  wc.qp_num = src->base.qp_num;
  pushLocked(src->base.send_cq, wc, true);
}

// An RDMA read `p` from `src` served by `dest`: from dest's region into src's local buffer.
void serveReadLocked(FakeQp* dest, FakeQp* src, const Packet& p) {
  const uint32_t length = p.has_sge ? p.sge.length : 0;
  if ((dest->access & IBV_ACCESS_REMOTE_READ) == 0) {
    ++g_stats.bad_access;  // the responder's queue pair does not allow reads
    if (src != nullptr) completeSendLocked(src, p, IBV_WC_REM_INV_REQ_ERR);
    return;
  }
  if (g_config.fail_reads) {
    if (src != nullptr) completeSendLocked(src, p, IBV_WC_REM_ACCESS_ERR);
    return;
  }
  const uint8_t* from = checkLocked(p.wr.wr.rdma.rkey, true, p.wr.wr.rdma.remote_addr, length,
                                    IBV_ACCESS_REMOTE_READ);
  if (from == nullptr) {
    ++g_stats.bad_access;
    if (src != nullptr) completeSendLocked(src, p, IBV_WC_REM_ACCESS_ERR);
    return;
  }
  uint8_t* to = p.has_sge
                    ? checkLocked(p.sge.lkey, false, p.sge.addr, length, IBV_ACCESS_LOCAL_WRITE)
                    : nullptr;
  if (p.has_sge && to == nullptr) {
    ++g_stats.bad_access;
    if (src != nullptr) completeSendLocked(src, p, IBV_WC_LOC_PROT_ERR);
    return;
  }
  if (length > 0) std::memcpy(to, from, length);
  ++g_stats.rdma_reads;
  g_read_addrs.push_back(p.wr.wr.rdma.remote_addr);
  if (src != nullptr) completeSendLocked(src, p, IBV_WC_SUCCESS);
}

}  // namespace

// Delivers the queued packets of `dest` while it can take them. Returns nothing: outcomes are
// completions.
void deliverLocked(FakeQp* dest) {
  while (!dest->pending.empty()) {
    if (dest->base.state != IBV_QPS_RTR && dest->base.state != IBV_QPS_RTS) return;
    const bool read = dest->pending.front().wr.opcode == IBV_WR_RDMA_READ;
    // Receiver not ready (reads need no receive): the sender's device retries.
    if (!read && dest->recvs.empty()) return;
    if (g_config.stall_data && dest->pending.front().wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
      return;  // a fabric that takes the writes and never acknowledges them
    }
    if (read && g_config.stall_reads) return;
    Packet p = dest->pending.front();
    dest->pending.pop_front();
    auto src_it = g_qps.find(p.src_qp);
    FakeQp* src = src_it == g_qps.end() ? nullptr : src_it->second;
    if (read) {
      serveReadLocked(dest, src, p);
      continue;
    }
    const uint32_t length = p.has_sge ? p.sge.length : 0;
    const uint8_t* source =
        p.has_sge ? checkLocked(p.sge.lkey, false, p.sge.addr, length, 0) : nullptr;
    if (p.has_sge && source == nullptr) {
      ++g_stats.bad_access;
      if (src != nullptr) completeSendLocked(src, p, IBV_WC_LOC_PROT_ERR);
      continue;
    }
    RecvWr recv = dest->recvs.front();
    ibv_wc wc{};
    wc.wr_id = recv.wr_id;
    wc.status = IBV_WC_SUCCESS;
    wc.qp_num = dest->base.qp_num;
    wc.byte_len = length;
    if (p.wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
      if (g_config.fail_writes) {
        if (src != nullptr) completeSendLocked(src, p, IBV_WC_REM_ACCESS_ERR);
        continue;
      }
      uint8_t* target = length > 0 ? checkLocked(p.wr.wr.rdma.rkey, true, p.wr.wr.rdma.remote_addr,
                                                 length, IBV_ACCESS_REMOTE_WRITE)
                                   : nullptr;
      if (length > 0 && target == nullptr) {
        ++g_stats.bad_access;
        if (src != nullptr) completeSendLocked(src, p, IBV_WC_REM_ACCESS_ERR);
        continue;
      }
      if (length > 0) std::memcpy(target, source, length);
      wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = p.wr.imm_data;
    } else {
      uint8_t* target = length > 0 ? checkLocked(recv.sge.lkey, false, recv.sge.addr, length,
                                                 IBV_ACCESS_LOCAL_WRITE)
                                   : nullptr;
      if (length > (recv.has_sge ? recv.sge.length : 0) || (length > 0 && target == nullptr)) {
        ++g_stats.bad_access;
        if (src != nullptr) completeSendLocked(src, p, IBV_WC_REM_INV_REQ_ERR);
        continue;
      }
      if (length > 0) std::memcpy(target, source, length);
      wc.opcode = IBV_WC_RECV;
    }
    dest->recvs.pop_front();
    pushLocked(dest->base.recv_cq, wc, false);
    if (src != nullptr) completeSendLocked(src, p, IBV_WC_SUCCESS);
  }
}

void flushLocked(FakeQp* qp) {
  for (const RecvWr& r : qp->recvs) {
    ibv_wc wc{};
    wc.wr_id = r.wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.qp_num = qp->base.qp_num;
    pushLocked(qp->base.recv_cq, wc, false);
  }
  qp->recvs.clear();
}

// Packets that will never be taken: their senders' devices give up.
void failPendingLocked(FakeQp* dest) {
  for (const Packet& p : dest->pending) {
    auto it = g_qps.find(p.src_qp);
    if (it != g_qps.end()) completeSendLocked(it->second, p, IBV_WC_RETRY_EXC_ERR);
  }
  dest->pending.clear();
}

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lock(g_mu);
  FakeQp* src = fakeQp(qp);
  for (; wr != nullptr; wr = wr->next) {
    if (src->base.state != IBV_QPS_RTS || wr->num_sge > 1 ||
        src->send_outstanding >= static_cast<int>(src->cap.max_send_wr)) {
      *bad = wr;
      return src->base.state != IBV_QPS_RTS ? EINVAL : ENOMEM;
    }
    Packet p;
    p.wr = *wr;
    p.wr.next = nullptr;
    p.has_sge = wr->num_sge == 1;
    if (p.has_sge) p.sge = wr->sg_list[0];
    p.wr.sg_list = nullptr;
    p.src_qp = src->base.qp_num;
    ++src->send_outstanding;
    auto it = g_qps.find(src->dest_qp);
    if (it == g_qps.end() || it->second->base.state == IBV_QPS_ERR) {
      completeSendLocked(src, p, IBV_WC_RETRY_EXC_ERR);
      continue;
    }
    FakeQp* dest = it->second;
    if (dest->base.state != IBV_QPS_RTR && dest->base.state != IBV_QPS_RTS) {
      ++g_stats.sent_before_rtr;
    } else if (!g_config.stall_data && !g_config.stall_reads &&
               ((wr->opcode != IBV_WR_RDMA_READ && dest->recvs.empty()) ||
                !dest->pending.empty())) {
      ++g_stats.rnr_waits;
    }
    dest->pending.push_back(p);
    deliverLocked(dest);
  }
  return 0;
}

int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::mutex> lock(g_mu);
  FakeQp* dest = fakeQp(qp);
  for (; wr != nullptr; wr = wr->next) {
    if (wr->num_sge > 1 || dest->recvs.size() >= dest->cap.max_recv_wr) {
      *bad = wr;
      return ENOMEM;
    }
    RecvWr r;
    r.wr_id = wr->wr_id;
    r.has_sge = wr->num_sge == 1;
    if (r.has_sge) r.sge = wr->sg_list[0];
    dest->recvs.push_back(r);
  }
  if (dest->base.state == IBV_QPS_ERR) flushLocked(dest);
  deliverLocked(dest);
  return 0;
}

int pollCq(ibv_cq* cq, int n, ibv_wc* out) {
  std::lock_guard<std::mutex> lock(g_mu);
  FakeCq* fake = fakeCq(cq);
  int got = 0;
  while (got < n && !fake->queue.empty()) {
    const FakeWc& f = fake->queue.front();
    if (f.is_send) {
      auto it = g_qps.find(f.wc.qp_num);
      if (it != g_qps.end()) --it->second->send_outstanding;
    }
    out[got++] = f.wc;
    fake->queue.pop_front();
  }
  return got;
}

int reqNotifyCq(ibv_cq* cq, int) {
  std::lock_guard<std::mutex> lock(g_mu);
  FakeCq* fake = fakeCq(cq);
  fake->armed = true;
  if (!fake->queue.empty()) {
    fake->armed = false;
    g_channel_cq[fake->base.channel] = fake;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t written = write(fake->base.channel->fd, &one, sizeof(one));
  }
  return 0;
}

}  // namespace tally::transport::test::fake

namespace tally::transport::test {

int breakFakeLoopbackQps() {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  int broken = 0;
  for (auto& [num, qp] : fake::g_qps) {
    if (qp->dest_qp != num || qp->base.state == IBV_QPS_ERR) continue;
    qp->base.state = IBV_QPS_ERR;
    fake::flushLocked(qp);
    fake::failPendingLocked(qp);
    ++broken;
  }
  return broken;
}

}  // namespace tally::transport::test
