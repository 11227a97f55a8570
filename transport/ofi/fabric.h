// SPDX-License-Identifier: Apache-2.0
// libfabric objects the ofi backend shares: owners for fid objects, and the opened domain of
// each device.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/ofi/loader.h"
#include "transport/ofi/ofi.h"
#include "transport/transport.h"

namespace tally::transport::ofi {

// Closes any fid object (fabric, domain, endpoint, CQ, AV, MR) with fi_close.
struct FidCloser {
  template <typename T>
  void operator()(T* object) const {
    if (object != nullptr) fi_close(&object->fid);
  }
};
template <typename T>
using FidPtr = std::unique_ptr<T, FidCloser>;

// An fi_info list freed with the loaded freeinfo.
struct InfoDeleter {
  const FabricApi* api = nullptr;
  void operator()(fi_info* info) const {
    if (info != nullptr) api->freeinfo(info);
  }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

// One opened domain: a device's fabric, domain and the fi_info they came from. Shared by the
// device and every connection and memory region made on it; closed when the last goes. Methods
// and fields are safe from any thread (the domain is opened FI_THREAD_SAFE).
class Domain {
 public:
  ~Domain();

  const FabricApi* api = nullptr;
  InfoPtr info;  // this domain's fi_info (a copy, its own list of one)
  FidPtr<fid_fabric> fabric;
  FidPtr<fid_domain> domain;
  std::string provider;  // "tcp;ofi_rxm"
  std::string name;      // the domain name, "lo"
  std::string address;   // the numeric IP of its source address, "" when not IP
  uint64_t mr_mode = 0;  // what the provider asks of registrations
  bool hmem = false;     // the provider can send device (CUDA) memory
  bool rma_read = false;  // the provider reads remote memory (FI_RMA, FI_READ): iflush
  bool force_local_mr = false;
  // No payload inline in control messages (hmem: buffers may be CUDA memory, never copied).
  bool no_inline = false;
  uint64_t max_chunk = 0;  // largest payload chunk this side sends or receives
  bool rxm_rendezvous = false;  // OfiOptions::rxm_rendezvous
  // The first endpoint says how large its chunks are (Endpoint::open).
  mutable std::once_flag chunk_logged;

  // Whether buffers must be registered before a send or receive (FI_MR_LOCAL, or forced).
  bool needsLocalRegistration() const { return force_local_mr || (mr_mode & FI_MR_LOCAL) != 0; }
  // Registers [data, data+size) for sends and receives (and RMA reads where rma_read). `ep`: the endpoint to bind to under
  // FI_MR_ENDPOINT (may be null otherwise). On error *out is untouched.
  Status registerMemory(void* data, size_t size, MemoryType type, fid_ep* ep,
                        FidPtr<fid_mr>* out) const;
  // "fi_endpoint failed: Connection refused (-111)"
  std::string errorText(const char* call, int ret) const;

 private:
  mutable std::atomic<uint64_t> next_key_{1};  // requested keys, unless FI_MR_PROV_KEY
};

// The provider's domains chosen by `options`, each opened, in libfabric's order (loopback last).
// Logs the provider picked. Errors as ofi::createNetwork.
Status openDomains(const FabricApi* api, const OfiOptions& options,
                   std::vector<std::shared_ptr<Domain>>* out);

// Device properties of a domain: name, address, PCI path and speed from the provider's NIC
// attributes when it gives them, else from sysfs for a domain named like a network interface.
DeviceProperties domainProperties(const Domain& domain);

}  // namespace tally::transport::ofi
