// SPDX-License-Identifier: Apache-2.0
#include "test/transport/verbs_fake.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "test/transport/verbs_fake_internal.h"

namespace tally::transport::test::fake {
namespace {

ibv_device** getDeviceList(int* count) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  *count = g_config.no_devices ? 0 : 1;
  if (!g_config.no_devices) list[0] = &g_device;
  return list;
}

void freeDeviceList(ibv_device** list) { std::free(list); }
const char* getDeviceName(ibv_device* device) { return device->name; }

ibv_context* openDevice(ibv_device* device) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto* ctx = new ibv_context{};
  ctx->device = device;
  ctx->ops.poll_cq = pollCq;
  ctx->ops.req_notify_cq = reqNotifyCq;
  ctx->ops.post_send = postSend;
  ctx->ops.post_recv = postRecv;
  ++g_stats.live_contexts;
  return ctx;
}

int closeDevice(ibv_context* ctx) {
  std::lock_guard<std::mutex> lock(g_mu);
  delete ctx;
  --g_stats.live_contexts;
  return 0;
}

int queryDevice(ibv_context*, ibv_device_attr* attr) {
  std::lock_guard<std::mutex> lock(g_mu);
  *attr = {};
  attr->max_qp_wr = g_config.max_qp_wr;
  attr->max_cqe = g_config.max_cqe;
  attr->phys_port_cnt = 1;
  attr->node_guid = 0x7a11e00000000001ull;
  return 0;
}

int queryPort(ibv_context*, uint8_t port, _compat_ibv_port_attr* compat) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (port != 1) return EINVAL;
  // Tally passes a whole ibv_port_attr (loader.h), as the header's wrapper does.
  auto* attr = reinterpret_cast<ibv_port_attr*>(compat);
  attr->state = IBV_PORT_ACTIVE;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = IBV_MTU_4096;
  attr->gid_tbl_len = 2;
  attr->lid = g_config.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : 7;
  attr->link_layer = g_config.link_layer;
  attr->active_width = 2;   // 4x
  attr->active_speed = 32;  // EDR
  return 0;
}

int queryGid(ibv_context*, uint8_t, int index, ibv_gid* gid) {
  *gid = {};
  gid->raw[0] = 0xfe;
  gid->raw[1] = 0x80;
  gid->raw[15] = 7;
  if (index == 1) {  // an IPv4-mapped entry, 10.0.0.7
    *gid = {};
    gid->raw[10] = gid->raw[11] = 0xff;
    gid->raw[12] = 10;
    gid->raw[15] = 7;
  }
  return index < 2 ? 0 : EINVAL;
}

ibv_pd* allocPd(ibv_context* ctx) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_stats.live_pds;
  return new ibv_pd{ctx, 0};
}

int deallocPd(ibv_pd* pd) {
  std::lock_guard<std::mutex> lock(g_mu);
  --g_stats.live_pds;
  delete pd;
  return 0;
}

ibv_comp_channel* createCompChannel(ibv_context* ctx) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_stats.live_channels;
  return new ibv_comp_channel{ctx, eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), 0};
}

int destroyCompChannel(ibv_comp_channel* channel) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_channel_cq.erase(channel);
  close(channel->fd);
  delete channel;
  --g_stats.live_channels;
  return 0;
}

ibv_cq* createCq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel, int) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (cqe < 1 || cqe > g_config.max_cqe) {
    errno = EINVAL;
    return nullptr;
  }
  auto* cq = new FakeCq;
  cq->base.context = ctx;
  cq->base.channel = channel;
  cq->base.cq_context = cq_context;
  cq->base.cqe = cqe;
  ++g_stats.live_cqs;
  return &cq->base;
}

int destroyCq(ibv_cq* cq) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto it = g_channel_cq.begin(); it != g_channel_cq.end();) {
    it = it->second == fakeCq(cq) ? g_channel_cq.erase(it) : std::next(it);
  }
  delete fakeCq(cq);
  --g_stats.live_cqs;
  return 0;
}

int getCqEvent(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  uint64_t value = 0;
  if (read(channel->fd, &value, sizeof(value)) != sizeof(value)) return -1;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_channel_cq.find(channel);
  if (it == g_channel_cq.end()) return -1;
  *cq = &it->second->base;
  *cq_context = it->second->base.cq_context;
  return 0;
}

void ackCqEvents(ibv_cq*, unsigned int) {}

ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* init) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (init->qp_type != IBV_QPT_RC || init->cap.max_send_wr == 0 ||
      init->cap.max_send_wr > static_cast<uint32_t>(g_config.max_qp_wr) ||
      init->cap.max_recv_wr > static_cast<uint32_t>(g_config.max_qp_wr)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* qp = new FakeQp;
  qp->base.context = pd->context;
  qp->base.pd = pd;
  qp->base.send_cq = init->send_cq;
  qp->base.recv_cq = init->recv_cq;
  qp->base.qp_num = g_next_qp++ & 0xffffff;
  qp->base.state = IBV_QPS_RESET;
  qp->base.qp_type = IBV_QPT_RC;
  qp->cap = init->cap;
  g_qps[qp->base.qp_num] = qp;
  ++g_stats.live_qps;
  return &qp->base;
}

int destroyQp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lock(g_mu);
  failPendingLocked(fakeQp(qp));
  g_qps.erase(qp->qp_num);
  delete fakeQp(qp);
  --g_stats.live_qps;
  return 0;
}

// The attribute masks IB requires for each RC transition (optional ones ignored).
int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  std::lock_guard<std::mutex> lock(g_mu);
  FakeQp* fake = fakeQp(qp);
  if ((mask & IBV_QP_STATE) == 0) return EINVAL;
  const ibv_qp_state from = fake->base.state;
  const ibv_qp_state to = attr->qp_state;
  int required = 0;
  bool legal = true;
  if (to == IBV_QPS_INIT) {
    legal = from == IBV_QPS_RESET;
    required = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  } else if (to == IBV_QPS_RTR) {
    legal = from == IBV_QPS_INIT;
    required = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  } else if (to == IBV_QPS_RTS) {
    legal = from == IBV_QPS_RTR;
    required = IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
               IBV_QP_MAX_QP_RD_ATOMIC;
  } else if (to != IBV_QPS_ERR) {
    legal = false;
  }
  if (!legal || (mask & required) != required ||
      (to == IBV_QPS_RTR && (attr->ah_attr.port_num != 1 || g_qps.count(attr->dest_qp_num) == 0))) {
    ++g_stats.bad_transitions;
    return EINVAL;
  }
  if (to == IBV_QPS_INIT) fake->access = attr->qp_access_flags;
  if (to == IBV_QPS_RTR) fake->dest_qp = attr->dest_qp_num;
  fake->base.state = to;
  if (to == IBV_QPS_ERR) {
    flushLocked(fake);
    failPendingLocked(fake);
  }
  if (to == IBV_QPS_RTR) deliverLocked(fake);
  return 0;
}

const char* wcStatusStr(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS:
      return "success";
    case IBV_WC_WR_FLUSH_ERR:
      return "Work Request Flushed Error";
    case IBV_WC_RETRY_EXC_ERR:
      return "transport retry counter exceeded";
    case IBV_WC_REM_ACCESS_ERR:
      return "remote access error";
    case IBV_WC_LOC_PROT_ERR:
      return "local protection error";
    case IBV_WC_REM_INV_REQ_ERR:
      return "remote invalid request error";
    default:
      return "other error";
  }
}

verbs::VerbsApi* makeTable() {
  auto* api = new verbs::VerbsApi;
  api->get_device_list = getDeviceList;
  api->free_device_list = freeDeviceList;
  api->get_device_name = getDeviceName;
  api->open_device = openDevice;
  api->close_device = closeDevice;
  api->query_device = queryDevice;
  api->query_port_compat = queryPort;
  api->query_gid = queryGid;
  api->alloc_pd = allocPd;
  api->dealloc_pd = deallocPd;
  api->reg_mr = regMr;
  api->reg_dmabuf_mr = regDmaBufMr;
  api->dereg_mr = deregMr;
  api->create_comp_channel = createCompChannel;
  api->destroy_comp_channel = destroyCompChannel;
  api->create_cq = createCq;
  api->destroy_cq = destroyCq;
  api->get_cq_event = getCqEvent;
  api->ack_cq_events = ackCqEvents;
  api->create_qp = createQp;
  api->destroy_qp = destroyQp;
  api->modify_qp = modifyQp;
  api->wc_status_str = wcStatusStr;
  std::strcpy(g_device.name, "fake0");
  return api;
}

}  // namespace
}  // namespace tally::transport::test::fake

namespace tally::transport::test {

using fake::g_config;
using fake::g_mu;
using fake::g_stats;

const verbs::VerbsApi* fakeVerbsApi() {
  // Never freed: connections may outlive any test's scope until the process ends.
  static const verbs::VerbsApi* api = fake::makeTable();
  return api;
}

const verbs::VerbsApi* fakeVerbsApiWithoutDmaBuf() {
  static const verbs::VerbsApi* api = [] {
    verbs::VerbsApi* table = fake::makeTable();
    table->reg_dmabuf_mr = nullptr;
    return table;
  }();
  return api;
}

void resetFakeVerbs(const FakeVerbsConfig& config) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_config = config;
  FakeVerbsStats live = g_stats;
  g_stats = {};
  fake::g_dmabuf_regs.clear();
  fake::g_read_addrs.clear();
  g_stats.live_contexts = live.live_contexts;
  g_stats.live_qps = live.live_qps;
  g_stats.live_cqs = live.live_cqs;
  g_stats.live_mrs = live.live_mrs;
  g_stats.live_pds = live.live_pds;
  g_stats.live_channels = live.live_channels;
}

FakeVerbsStats fakeVerbsStats() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_stats;
}

}  // namespace tally::transport::test
