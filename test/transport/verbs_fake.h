// SPDX-License-Identifier: Apache-2.0
// A software stand-in for libibverbs and an RDMA device, for tests on hosts without one.
//
// fakeVerbsApi() returns a VerbsApi table whose functions keep every object in process: one
// device "fake0" with one active port, queue pairs that move data between each other by memcpy
// the moment a work request is posted (in order per queue pair, as RC does), memory regions
// whose keys are checked on every access, and completion queues that wake their channel's fd.
// It checks what a device would refuse (keys, bounds, queue depths, state transitions and their
// attribute masks) and counts what a real fabric would only make slow (a packet sent to a queue
// pair not yet in RTR, a write that had to wait for a receive), so tests can assert both never
// happen. It is not a model of timing: everything completes at once.
//
// GPU memory: ibv_reg_dmabuf_mr takes any mappable fd (tests use a memfd) and maps it at the
// offset, so what the device writes or reads there is what the test sees through its own mapping
// of the same fd. RDMA reads are served from the responder's memory region (its rkey, its bounds,
// IBV_ACCESS_REMOTE_READ on the region and the queue pair) into the reader's local buffer; a queue
// pair may be connected to itself.
#pragma once

#include <cstdint>
#include <vector>

#include "transport/verbs/loader.h"

namespace tally::transport::test {

struct FakeVerbsConfig {
  uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;  // or IBV_LINK_LAYER_ETHERNET (RoCE)
  int max_qp_wr = 16384;
  int max_cqe = 1 << 22;
  bool no_devices = false;   // the device list is empty
  bool stall_data = false;   // RDMA writes are never delivered nor completed (control still is)
  bool fail_writes = false;  // every RDMA write completes with a remote access error
  bool fail_reads = false;   // every RDMA read completes with a remote access error
  bool stall_reads = false;  // RDMA reads are never served nor completed
  // Non-zero: ibv_reg_dmabuf_mr fails with this errno whatever the fd, as a provider or kernel
  // without dma-buf support does (EOPNOTSUPP). 0: it works (fd -1 gives EBADF).
  int dmabuf_errno = 0;
};

struct FakeVerbsStats {
  int64_t sent_before_rtr = 0;  // packets to a queue pair not yet able to receive
  int64_t rnr_waits = 0;        // writes or sends that found no receive posted
  int64_t bad_access = 0;       // a key, bound or access right a device would refuse
  int64_t cq_overflows = 0;
  int64_t bad_transitions = 0;  // ibv_modify_qp calls a device would refuse
  int64_t rdma_reads = 0;       // RDMA reads served
  int live_contexts = 0;
  int live_qps = 0;
  int live_cqs = 0;
  int live_mrs = 0;
  int live_pds = 0;
  int live_channels = 0;
};

// The table (the same object every call). Thread-safe.
const verbs::VerbsApi* fakeVerbsApi();
// The same device through a libibverbs too old to have ibv_reg_dmabuf_mr (the entry is null).
const verbs::VerbsApi* fakeVerbsApiWithoutDmaBuf();
// Sets the configuration for devices opened from now on, and zeroes the event counters.
void resetFakeVerbs(const FakeVerbsConfig& config);
FakeVerbsStats fakeVerbsStats();

// A successful ibv_reg_dmabuf_mr, as it was called.
struct FakeDmaBufRegistration {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t iova = 0;
  int access = 0;
};
// Since the last reset: the dma-buf registrations, and the remote address of every RDMA read
// served, in order.
std::vector<FakeDmaBufRegistration> fakeDmaBufRegistrations();
std::vector<uint64_t> fakeReadAddresses();
// Moves every queue pair connected to itself to ERROR, as a device fault would; returns how many.
int breakFakeLoopbackQps();

}  // namespace tally::transport::test
