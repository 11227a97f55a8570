// SPDX-License-Identifier: Apache-2.0
#include "transport/verbs/loader.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>

namespace tally::transport::verbs {
namespace {

// Looks up `name` into *slot. Required symbols fail the load; optional ones stay null.
template <typename Fn>
Status lookup(void* handle, const std::string& library, const char* name, bool required, Fn* slot) {
  dlerror();
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    if (!required) return Status::ok();
    const char* why = dlerror();
    return Status::invalidUsage(library + " has no " + name + " (" +
                                (why != nullptr ? why : "not found") +
                                "): rdma-core is too old or this is not libibverbs");
  }
  // POSIX guarantees that a dlsym'ed object pointer converts to the function's pointer type.
  *slot = reinterpret_cast<Fn>(symbol);
  return Status::ok();
}

Status fill(void* handle, const std::string& lib, VerbsApi* api) {
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_get_device_list", true, &api->get_device_list));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_free_device_list", true, &api->free_device_list));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_get_device_name", true, &api->get_device_name));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_open_device", true, &api->open_device));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_close_device", true, &api->close_device));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_query_device", true, &api->query_device));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_query_port", true, &api->query_port_compat));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_query_gid", true, &api->query_gid));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_alloc_pd", true, &api->alloc_pd));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_dealloc_pd", true, &api->dealloc_pd));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_reg_mr", true, &api->reg_mr));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_reg_mr_iova2", false, &api->reg_mr_iova2));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_reg_dmabuf_mr", false, &api->reg_dmabuf_mr));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_dereg_mr", true, &api->dereg_mr));
  TALLY_RETURN_IF_ERROR(
      lookup(handle, lib, "ibv_create_comp_channel", true, &api->create_comp_channel));
  TALLY_RETURN_IF_ERROR(
      lookup(handle, lib, "ibv_destroy_comp_channel", true, &api->destroy_comp_channel));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_create_cq", true, &api->create_cq));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_destroy_cq", true, &api->destroy_cq));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_get_cq_event", true, &api->get_cq_event));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_ack_cq_events", true, &api->ack_cq_events));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_create_qp", true, &api->create_qp));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_destroy_qp", true, &api->destroy_qp));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_modify_qp", true, &api->modify_qp));
  TALLY_RETURN_IF_ERROR(lookup(handle, lib, "ibv_wc_status_str", true, &api->wc_status_str));
  return Status::ok();
}

}  // namespace

int VerbsApi::queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const {
  std::memset(attr, 0, sizeof(*attr));
  // Providers with an extended context fill the whole struct given its size; the exported
  // function only knows the older prefix of it (the header's inline wrapper makes this choice).
  verbs_context* extended = verbs_get_ctx_op(context, query_port);
  if (extended != nullptr) return extended->query_port(context, port, attr, sizeof(*attr));
  return query_port_compat(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

VerbsApi::~VerbsApi() {
  if (handle != nullptr) dlclose(handle);
}

Status loadVerbsFrom(const std::string& library, std::unique_ptr<VerbsApi>* out) {
  // RTLD_LOCAL: the symbols stay out of the global namespace, so another copy of libibverbs
  // the application loads itself does not clash with ours.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status::invalidUsage("cannot load " + library + " (" +
                                (why != nullptr ? why : "unknown error") +
                                "): the verbs transport needs rdma-core's libibverbs");
  }
  auto api = std::make_unique<VerbsApi>();
  api->handle = handle;
  TALLY_RETURN_IF_ERROR(fill(handle, library, api.get()));
  *out = std::move(api);
  return Status::ok();
}

Status loadVerbs(const VerbsApi** out) {
  static std::once_flag once;
  // Deliberately never freed: the table and the library stay until exit, so no static
  // destructor can unload them under a thread still using them.
  static const VerbsApi* api = nullptr;
  static const Status* result = nullptr;
  std::call_once(once, [] {
    std::unique_ptr<VerbsApi> loaded;
    result = new Status(loadVerbsFrom(kVerbsLibrary, &loaded));
    api = loaded.release();
  });
  TALLY_RETURN_IF_ERROR(*result);
  *out = api;
  return Status::ok();
}

}  // namespace tally::transport::verbs
