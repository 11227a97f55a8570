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
  wc.opcode = p.wr.opcode == IBV_WR_SEND ? IBV_WC_SEND : IBV_WC_RDMA_WRITE;
  wc.qp_num = src->base.qp_num;
  pushLocked(src->base.send_cq, wc, true);
}

// The memory region holding [addr, addr+length) under `key`; null when a device would refuse.
ibv_mr* checkLocked(uint32_t key, bool remote, uint64_t addr, uint64_t length) {
  auto it = g_mrs.find(remote ? key - 1 : key);
  if (it == g_mrs.end() || (remote && it->second->rkey != key)) return nullptr;
  ibv_mr* mr = it->second;
  const auto base = reinterpret_cast<uintptr_t>(mr->addr);
  if (addr < base || addr + length > base + mr->length) return nullptr;
  return mr;
}

}  // namespace

// Delivers the queued packets of `dest` while it can take them. Returns nothing: outcomes are
// completions.
void deliverLocked(FakeQp* dest) {
  while (!dest->pending.empty()) {
    if (dest->base.state != IBV_QPS_RTR && dest->base.state != IBV_QPS_RTS) return;
    if (dest->recvs.empty()) return;  // receiver not ready: the sender's device retries
    if (g_config.stall_data && dest->pending.front().wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
      return;  // a fabric that takes the writes and never acknowledges them
    }
    Packet p = dest->pending.front();
    dest->pending.pop_front();
    auto src_it = g_qps.find(p.src_qp);
    FakeQp* src = src_it == g_qps.end() ? nullptr : src_it->second;
    const uint32_t length = p.has_sge ? p.sge.length : 0;
    if (p.has_sge && checkLocked(p.sge.lkey, false, p.sge.addr, length) == nullptr) {
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
      if (length > 0 &&
          checkLocked(p.wr.wr.rdma.rkey, true, p.wr.wr.rdma.remote_addr, length) == nullptr) {
        ++g_stats.bad_access;
        if (src != nullptr) completeSendLocked(src, p, IBV_WC_REM_ACCESS_ERR);
        continue;
      }
      if (length > 0) {
        std::memcpy(reinterpret_cast<void*>(p.wr.wr.rdma.remote_addr),
                    reinterpret_cast<const void*>(p.sge.addr), length);
      }
      wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = p.wr.imm_data;
    } else {
      if (length > (recv.has_sge ? recv.sge.length : 0) ||
          (length > 0 && checkLocked(recv.sge.lkey, false, recv.sge.addr, length) == nullptr)) {
        ++g_stats.bad_access;
        if (src != nullptr) completeSendLocked(src, p, IBV_WC_REM_INV_REQ_ERR);
        continue;
      }
      if (length > 0) {
        std::memcpy(reinterpret_cast<void*>(recv.sge.addr),
                    reinterpret_cast<const void*>(p.sge.addr), length);
      }
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
    } else if (!g_config.stall_data && (dest->recvs.empty() || !dest->pending.empty())) {
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
