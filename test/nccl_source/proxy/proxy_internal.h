// SPDX-License-Identifier: Apache-2.0
// Shared by the NCCL side of the proxy tests (C++17, NCCL's headers): the process-wide state the
// stubs of NCCL's proxy plumbing reach, the spy table between NCCL's proxy and Tally, and the
// CPU threads that play the GPU kernel. Not for the C++20 test side, which sees proxy_rank.h.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "comm.h"
#include "proxy.h"
#include "test/nccl_source/proxy/proxy_rank.h"
#include "transport.h"

extern struct ncclTransport collNetTransport;

namespace tally::nccl_source {

using Clock = std::chrono::steady_clock;

// What ncclProxyConnect and ncclProxyCallBlocking (proxy_stubs.cc) reach. One per process: a
// rank process holds one communicator, as the tests run it.
struct ProxyWorld {
  ncclProxyState* proxy_state = nullptr;
  // Connections in the order ncclProxyConnect made them, which is the order NCCL's proxy frees
  // its connection pool in.
  std::vector<ncclProxyConnection*> connections;
};
ProxyWorld& proxyWorld();

// Pinned host memory NCCL holds through cudaHostAlloc (proxy_stubs.cc): allocations not freed.
int64_t liveHostAllocations();

// Puts a copy of comm's CollNet table that counts calls and registrations (spy_table.cc) in
// front of Tally's, as proxyState->ncclCollNet. Call once, after ncclNetInit.
void installSpy(ncclComm* comm, ncclProxyState* proxy_state);
ProxyCalls spyCalls();

// The NCCL side of one collective as the kernel of one channel sees it.
struct GpuSideJob {
  ProxyCollective c;
  int part = 0;  // the channel's index among the collective's channels
  int node = 0;  // comm->node (one rank per node)
  int nnodes = 1;
  bool send = false;  // the send connector (data to the network) or the receive one
  // The connector's ncclConnInfo as the kernel gets it; its step carries over from one
  // collective to the next, as the kernel saves it.
  ncclConnInfo* conn = nullptr;
  const std::atomic<bool>* stop = nullptr;
  Clock::time_point deadline;
};

// Runs the kernel's side of NCCL's step protocol for one connection and one collective: waits
// for credits (send) or data (receive), reads each step's offset from connFifo, writes the send
// size, copies real data in or out of NCCL's shared buffer, and moves tail (send) or head
// (receive). Returns "" or why it stopped (stop flag, deadline).
std::string runGpuSide(const GpuSideJob& job);

// A communicator as far as the CollNet proxy needs one, and its connectors per channel. The
// connectors are the host copies NCCL keeps in comm->channels[c].peers[nRanks]; the kernel gets
// a copy of their conn, which here is the same memory.
struct CommState {
  ncclComm* comm = nullptr;
  ncclProxyState* proxy_state = nullptr;
  std::vector<ncclConnector*> send;  // per channel
  std::vector<ncclConnector*> recv;
};

// A zeroed communicator with what NCCL's init has set when it loads the net and sets up CollNet
// (rank, node, one local rank, buffer sizes, commHash, the shared CollNet resources), then NCCL's
// ncclNetInit, the spy table, and a proxy state holding the CollNet table and context.
ProxyResult initComm(const ProxyRankOptions& options, CommState* state);
// For each channel: NCCL's receive setup, the handle all-gather, receive connect, send setup and
// send connect, in the order ncclTransportCollNetSetup runs them; then the reduceSupport matrix
// ncclCollNetSetup asks every head for (every type x sum, prod, max, min), all of which Tally
// must support.
ProxyResult connectChannels(const ProxyRankOptions& options, CommState* state);
// Frees what initComm allocated (after the connections are freed).
void freeComm(CommState* state);

// The proxy op fields NCCL's enqueue computes for a CollNet collective with one rank per node,
// written into a fresh ncclProxyArgs the way ncclProxyOpToArgs appends one sub per channel.
void fillProxyArgs(const ProxyCollective& c, int node, int nnodes, size_t buff_size,
                   uint64_t op_count, ncclConnector* const* connectors, ncclProxyArgs* args);

}  // namespace tally::nccl_source
