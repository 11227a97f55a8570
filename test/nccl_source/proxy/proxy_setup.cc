// SPDX-License-Identifier: Apache-2.0
// Setting up what NCCL's CollNet proxy runs on: a communicator with Tally loaded through NCCL's own
// ncclNetInit, the CollNet connectors of every channel made by NCCL's own transport functions
// (recvSetup, recvConnect, sendSetup, sendConnect, which reach the proxy functions through the
// in-process proxy call of proxy_stubs.cc), and the ncclProxyArgs NCCL's proxy progresses for a
// collective.
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "comm.h"
#include "net.h"
#include "test/nccl_source/proxy/proxy_internal.h"

namespace tally::nccl_source {
namespace {

// NCCL's default NCCL_BUFFSIZE for the Simple protocol: 8 steps of 512 KiB.
constexpr int kSimpleBuffSize = 4 << 20;

ProxyResult failed(ncclResult_t rc, const std::string& what) {
  ProxyResult r;
  r.nccl_rc = rc == ncclSuccess ? ncclInternalError : rc;
  r.error = what + " returned " + std::to_string(static_cast<int>(rc));
  return r;
}

}  // namespace

ProxyResult initComm(const ProxyRankOptions& options, CommState* state) {
  auto* comm = static_cast<ncclComm*>(calloc(1, sizeof(ncclComm)));
  state->comm = comm;
  comm->rank = options.rank;
  comm->nRanks = options.nranks;
  // One GPU per node: every rank is its node's head, node index = rank.
  comm->node = options.rank;
  comm->nNodes = options.nranks;
  comm->localRank = 0;
  comm->localRanks = 1;
#if NCCL_VERSION_CODE >= 22800
  comm->isOneRPN = true;
#endif
  comm->nChannels = options.channels;
  comm->buffSizes[NCCL_PROTO_SIMPLE] = kSimpleBuffSize;
  comm->topParentLocalRanks = static_cast<int*>(calloc(1, sizeof(int)));
  comm->topParentRanks = static_cast<int*>(calloc(options.nranks + 1, sizeof(int)));
  for (int r = 0; r <= options.nranks; r++) comm->topParentRanks[r] = r;
  comm->config.netName = "Tally";
#if NCCL_VERSION_CODE >= 22600
  comm->config.trafficClass = NCCL_CONFIG_UNDEF_INT;
#endif
  comm->commHash = options.comm_hash;
#if NCCL_VERSION_CODE >= 22800
  comm->config.collnetEnable = 1;
#endif

#if NCCL_VERSION_CODE < 22600
  // Before the plugin folder, ncclInit loads the plugin once per process.
  static const ncclResult_t loaded = ncclNetPluginInit();
  if (loaded != ncclSuccess) return failed(loaded, "ncclNetPluginInit");
#endif
  const ncclResult_t rc = ncclNetInit(comm);
  if (rc != ncclSuccess) return failed(rc, "ncclNetInit");
  if (comm->ncclCollNet == nullptr) {
    return failed(ncclInternalError, "ncclNetInit gave no CollNet table (is TALLY_REDUCERS set?)");
  }

  auto* proxy = static_cast<ncclProxyState*>(calloc(1, sizeof(ncclProxyState)));
  state->proxy_state = proxy;
  proxy->ncclNet = comm->ncclNet;
  proxy->ncclCollNet = comm->ncclCollNet;
#if NCCL_VERSION_CODE >= 22600
  proxy->netContext = comm->netContext;
  proxy->collNetContext = comm->collNetContext;
#endif
  proxy->dmaBufSupport = false;
  installSpy(comm, proxy);
  comm->proxyState = proxy;
  proxyWorld().proxy_state = proxy;

  // What ncclCollNetSetup allocates for the proxy (which frees it with the last connection).
  comm->collNetSharedRes =
      static_cast<ncclCollNetSharedRes*>(calloc(1, sizeof(ncclCollNetSharedRes)));
  comm->collNetSharedRes->nChannels = comm->nChannels;
  comm->collNetSharedRes->buffSize = comm->buffSizes[NCCL_PROTO_SIMPLE];
  return {};
}

ProxyResult connectChannels(const ProxyRankOptions& options, CommState* state) {
  ncclComm* comm = state->comm;
  const int nranks = options.nranks;
  ncclPeerInfo me{};
  me.rank = options.rank;
  ncclPeerInfo root{};  // the CollNet root is the nRanks-th peer
  root.rank = nranks;
  std::vector<ncclTopoGraph> graph(1);
  for (int c = 0; c < options.channels; c++) {
    auto* recv = static_cast<ncclConnector*>(calloc(1, sizeof(ncclConnector)));
    auto* send = static_cast<ncclConnector*>(calloc(1, sizeof(ncclConnector)));
    state->recv.push_back(recv);
    state->send.push_back(send);
    recv->transportComm = &collNetTransport.recv;
    send->transportComm = &collNetTransport.send;

    // Receive side: setup (listen), all-gather the connect info, connect (CollNet connect on the
    // first channel, then regMr).
    ncclConnect mine{};
    ncclResult_t rc =
        collNetTransport.recv.setup(comm, graph.data(), &me, &root, &mine, recv, c, collNetRecv);
    if (rc != ncclSuccess) return failed(rc, "recvSetup");
    std::vector<ncclConnect> masters(nranks);
    const std::string why = options.all_gather(&mine, sizeof(mine), masters.data());
    if (!why.empty()) return failed(ncclSystemError, "handle all-gather: " + why);
    rc = collNetTransport.recv.connect(comm, masters.data(), nranks, comm->node, recv);
    if (rc != ncclSuccess) return failed(rc, "recvConnect");
    // The receive connect left the request FIFO and registrations for the send side in this
    // node's entry.
    const ncclConnect to_send = masters[comm->node];

    ncclConnect unused{};
    rc = collNetTransport.send.setup(comm, graph.data(), &me, &root, &unused, send, c, collNetSend);
    if (rc != ncclSuccess) return failed(rc, "sendSetup");
    std::vector<ncclConnect> send_masters(nranks);
    send_masters[comm->node] = to_send;
    rc = collNetTransport.send.connect(comm, send_masters.data(), nranks, comm->node, send);
    if (rc != ncclSuccess) return failed(rc, "sendConnect");
  }

  // The support matrix NCCL's ncclCollNetSetup asks every head for: 12 types x sum, prod, max,
  // min. Tally must support all of them.
  for (int type = 0; type < ncclNumTypes; type++) {
    for (int op = 0; op < 4; op++) {
      int supported = 0;
      const ncclResult_t rc = state->proxy_state->ncclCollNet->reduceSupport(
          static_cast<ncclDataType_t>(type), static_cast<ncclRedOp_t>(op), &supported);
      if (rc != ncclSuccess || supported != 1) {
        return failed(rc == ncclSuccess ? ncclInvalidUsage : rc,
                      "reduceSupport(type " + std::to_string(type) + ", op " + std::to_string(op) +
                          ") said " + std::to_string(supported) + ", and");
      }
    }
  }
  return {};
}

void freeComm(CommState* state) {
  for (ncclConnector* c : state->send) free(c);
  for (ncclConnector* c : state->recv) free(c);
  state->send.clear();
  state->recv.clear();
  for (ncclProxyConnection* c : proxyWorld().connections) free(c);
  proxyWorld().connections.clear();
  proxyWorld().proxy_state = nullptr;
  if (state->comm != nullptr) {
    free(state->comm->topParentLocalRanks);
    free(state->comm->topParentRanks);
    free(state->comm);
    state->comm = nullptr;
  }
  free(state->proxy_state);
  state->proxy_state = nullptr;
}

void fillProxyArgs(const ProxyCollective& c, int node, int nnodes, size_t buff_size,
                   uint64_t op_count, ncclConnector* const* connectors, ncclProxyArgs* args) {
  const bool all_reduce = c.coll == ProxyColl::kAllReduce;
  const size_t elt = proxyTypeSize(c.dtype);
  // enqueue's calcCollChunking for CollNet: one step per loop of channels x chunk (one head per
  // node, so CollNetDirect's nHeads is 1), chunkSteps = sliceSteps = 1 outside Ring.
  const size_t bytes = all_reduce ? c.count * elt : c.count * elt * nnodes;
  const size_t loop = static_cast<size_t>(c.channels) * static_cast<size_t>(c.chunk_bytes);
  const int nsteps = static_cast<int>((bytes + loop - 1) / loop);
  const int step_size = static_cast<int>(buff_size / NCCL_STEPS);
  // "Network sees avg as sum": PreMulSum and SumPostDiv, the device ops of ncclAvg and of a
  // user-created PreMulSum op, go out as ncclSum.
  const int red_op = c.op == ncclAvg || c.op >= ncclNumOps ? ncclSum : c.op;

  for (int s = 0; s < c.channels; s++) {
    // ncclProxyOpToArgs, one sub per channel, appended in channel order.
    ncclProxySubArgs* sub = args->subs + s;
    sub->connection = connectors[s]->proxyConn.connection;
    sub->channelId = s;
    sub->nsteps = nsteps;
    sub->nbytes = step_size;
    sub->offset = 0;
#if NCCL_VERSION_CODE >= 22800
    sub->chunkSize = c.chunk_bytes;
    sub->loopSize = static_cast<ssize_t>(loop);
    sub->loopOffset = 0;
    sub->isOneRPN = 1;
#endif
    sub->peer = nnodes;
    sub->reg = 0;
  }
  args->nsubs = c.channels;
  args->done = 0;
  args->opCount = op_count;
  args->sliceSteps = 1;
  args->chunkSteps = 1;
  args->chunkSize = c.chunk_bytes;
  args->dtype = static_cast<uint8_t>(c.dtype);
  args->redOp = static_cast<uint8_t>(red_op);
  args->pattern = all_reduce ? ncclPatternCollnetChain : ncclPatternCollnetDirect;
  args->protocol = NCCL_PROTO_SIMPLE;
  args->coll = all_reduce                        ? ncclFuncAllReduce
               : c.coll == ProxyColl::kAllGather ? ncclFuncAllGather
                                                 : ncclFuncReduceScatter;
#if NCCL_VERSION_CODE >= 22800
  args->collAPI = args->coll;
  args->algorithm = all_reduce ? NCCL_ALGO_COLLNET_CHAIN : NCCL_ALGO_COLLNET_DIRECT;
  args->nChannels = c.channels;
  args->nPeers = 1;
#endif
  if (!all_reduce) {
    args->specifics.collnetDirect.nNodes = nnodes;
    args->specifics.collnetDirect.node = node;
    args->specifics.collnetDirect.sizePerRank = c.count * elt;
  }
  args->state = ncclProxyOpReady;
  args->progress = connectors[0]->proxyConn.connection->tcomm->proxyProgress;
  args->proxyAppendPtr = connectors[0]->proxyConn.connection->proxyAppendPtr;
}

}  // namespace tally::nccl_source
