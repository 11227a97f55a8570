// SPDX-License-Identifier: Apache-2.0
// libibverbs, loaded at run time.
//
// Tally never links libibverbs: the library is dlopen'ed the first time the verbs transport is
// asked for, so one build runs on hosts without rdma-core. Only the exported functions are
// looked up here; the data-path calls (ibv_post_send, ibv_post_recv, ibv_poll_cq,
// ibv_req_notify_cq) are inline in <infiniband/verbs.h> and go through the provider's context
// ops, so they need no symbol.
//
// Several verbs.h names are macros over inline wrappers (ibv_query_port, ibv_reg_mr,
// ibv_get_device_list). The table below therefore uses its own member names and holds the
// exported symbols; queryPort() does what the header's wrapper does.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace tally::transport::verbs {

inline constexpr const char* kVerbsLibrary = "libibverbs.so.1";

// The exported libibverbs functions Tally calls. Every pointer not marked optional is non-null
// in a table returned by loadVerbs(). Immutable once loaded; safe to use from any thread.
struct VerbsApi {
  ibv_device** (*get_device_list)(int* num_devices) = nullptr;
  void (*free_device_list)(ibv_device** list) = nullptr;
  const char* (*get_device_name)(ibv_device* device) = nullptr;
  ibv_context* (*open_device)(ibv_device* device) = nullptr;
  int (*close_device)(ibv_context* context) = nullptr;
  int (*query_device)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  // The exported ibv_query_port takes the older, shorter port attribute struct; use queryPort().
  int (*query_port_compat)(ibv_context* context, uint8_t port,
                           _compat_ibv_port_attr* attr) = nullptr;
  int (*query_gid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context* context) = nullptr;
  int (*dealloc_pd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
  // Optional (rdma-core 29+, IBVERBS_1.8): registration with an IOVA and the newer access bits.
  ibv_mr* (*reg_mr_iova2)(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                          unsigned int access) = nullptr;
  // Optional (rdma-core 34+, IBVERBS_1.12): registration of a dma-buf (GPU memory by fd).
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                           int access) = nullptr;
  int (*dereg_mr)(ibv_mr* mr) = nullptr;
  ibv_comp_channel* (*create_comp_channel)(ibv_context* context) = nullptr;
  int (*destroy_comp_channel)(ibv_comp_channel* channel) = nullptr;
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                       int comp_vector) = nullptr;
  int (*destroy_cq)(ibv_cq* cq) = nullptr;
  int (*get_cq_event)(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) = nullptr;
  void (*ack_cq_events)(ibv_cq* cq, unsigned int count) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*destroy_qp)(ibv_qp* qp) = nullptr;
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int mask) = nullptr;
  const char* (*wc_status_str)(ibv_wc_status status) = nullptr;

  // The full ibv_port_attr, through the provider's extended op when it has one, else through
  // the exported function (fields past the old struct then read zero).
  int queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const;

  // The dlopen handle; closed with the table (the process-wide table is never destroyed).
  void* handle = nullptr;
  ~VerbsApi();
};

// The process-wide table, loading kVerbsLibrary on first use (thread-safe, loaded once; a
// failure is remembered and returned again). Fails with kInvalidUsage when the library or one of
// the required symbols is missing, naming which.
Status loadVerbs(const VerbsApi** out);

// Loads `library` into a table of its own; for tests (a missing or wrong library).
Status loadVerbsFrom(const std::string& library, std::unique_ptr<VerbsApi>* out);

}  // namespace tally::transport::verbs
