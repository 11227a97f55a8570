// SPDX-License-Identifier: Apache-2.0
#include "transport/ofi/fabric.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "common/strings.h"
#include "transport/tcp/tcp.h"

namespace tally::transport::ofi {
namespace {

constexpr uint64_t kDefaultMaxChunk = 1ull << 30;
constexpr int kDefaultSpeedMbps = 10000;

std::string numericAddress(const fi_info& info) {
  char text[INET6_ADDRSTRLEN] = {};
  if (info.src_addr == nullptr) return "";
  if (info.addr_format == FI_SOCKADDR_IN && info.src_addrlen >= sizeof(sockaddr_in)) {
    const auto* in = static_cast<const sockaddr_in*>(info.src_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) return text;
  } else if (info.addr_format == FI_SOCKADDR_IN6 && info.src_addrlen >= sizeof(sockaddr_in6)) {
    const auto* in6 = static_cast<const sockaddr_in6*>(info.src_addr);
    if (inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) != nullptr) return text;
  }
  return "";
}

bool isLoopback(const std::string& name, const std::string& address) {
  return name == "lo" || address.rfind("127.", 0) == 0 || address == "::1";
}

uint64_t hashName(const std::string& name) {
  uint64_t hash = 0xcbf29ce484222325ull;  // 64-bit FNV-1a
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::string realPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return "";
  return resolved;
}

// fi_getinfo for reliable tagged messaging, with FI_HMEM when `hmem` and RMA reads when `rma`
// (the read-back of iflush). No match: success with an empty list.
Status queryInfo(const FabricApi* api, const OfiOptions& options, bool hmem, bool rma,
                 InfoPtr* out) {
  InfoPtr hints(api->dupinfo(nullptr), InfoDeleter{api});
  if (!hints) return Status::internal("fi_dupinfo could not allocate hints");
  hints->caps = FI_TAGGED | FI_MSG | (hmem ? FI_HMEM : 0) |
                (rma ? FI_RMA | FI_READ | FI_REMOTE_READ : 0);
  // Tally gives every operation its own fi_context2, so either context mode is fine.
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                FI_MR_ENDPOINT | (hmem ? FI_MR_HMEM : 0);
  hints->domain_attr->threading = FI_THREAD_SAFE;
  if (!options.provider.empty()) hints->fabric_attr->prov_name = strdup(options.provider.c_str());
  fi_info* list = nullptr;
  const int ret = api->getinfo(api->apiVersion(), nullptr, nullptr, 0, hints.get(), &list);
  if (ret == -FI_ENODATA) {
    *out = InfoPtr(nullptr, InfoDeleter{api});
    return Status::ok();
  }
  if (ret != 0) return Status::internal("fi_getinfo failed: " + api->errorText(ret));
  *out = InfoPtr(list, InfoDeleter{api});
  return Status::ok();
}

Status openOne(const FabricApi* api, const fi_info& chosen, bool hmem, bool rma,
               const OfiOptions& options, std::shared_ptr<Domain>* out) {
  auto domain = std::make_shared<Domain>();
  domain->api = api;
  domain->info = InfoPtr(api->dupinfo(&chosen), InfoDeleter{api});
  if (!domain->info) return Status::internal("fi_dupinfo could not copy a domain's info");
  fi_info* info = domain->info.get();
  domain->provider = info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "";
  domain->name = info->domain_attr->name ? info->domain_attr->name : "";
  domain->address = numericAddress(*info);
  domain->mr_mode = info->domain_attr->mr_mode;
  domain->hmem = hmem && (info->caps & FI_HMEM) != 0;
  domain->rma_read = rma && (info->caps & FI_RMA) != 0 && (info->caps & FI_READ) != 0;
  domain->force_local_mr = options.force_local_mr;
  domain->no_inline = domain->hmem || options.no_inline;
  domain->rxm_rendezvous = options.rxm_rendezvous;
  const uint64_t provider_max = info->ep_attr->max_msg_size;
  domain->max_chunk = options.max_chunk_bytes > 0 ? options.max_chunk_bytes : kDefaultMaxChunk;
  if (provider_max > 0 && provider_max < domain->max_chunk) domain->max_chunk = provider_max;

  fid_fabric* fabric = nullptr;
  int ret = api->fabric(info->fabric_attr, &fabric, nullptr);
  if (ret != 0) return Status::internal(domain->errorText("fi_fabric", ret));
  domain->fabric.reset(fabric);
  fid_domain* opened = nullptr;
  ret = fi_domain(fabric, info, &opened, nullptr);
  if (ret != 0) return Status::internal(domain->errorText("fi_domain", ret));
  domain->domain.reset(opened);
  *out = std::move(domain);
  return Status::ok();
}

}  // namespace

Domain::~Domain() {
  // Members go in reverse order (domain, then fabric, then info); spelled out for the reader.
  domain.reset();
  fabric.reset();
  info.reset();
}

std::string Domain::errorText(const char* call, int ret) const {
  return std::string(call) + " failed on provider " + provider + " domain " + name + ": " +
         api->errorText(ret);
}

Status Domain::registerMemory(void* data, size_t size, MemoryType type, fid_ep* ep,
                              FidPtr<fid_mr>* out) const {
  if (type == MemoryType::kCuda && !hmem) {
    return Status::invalidUsage("ofi provider " + provider +
                                " cannot send CUDA memory (it does not offer FI_HMEM)");
  }
  iovec iov{data, size};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  // With RMA reads on, any buffer may be read back (iflush) or be the read's landing place.
  attr.access = FI_SEND | FI_RECV | (rma_read ? FI_READ | FI_REMOTE_READ : 0);
  attr.requested_key = (mr_mode & FI_MR_PROV_KEY) ? 0 : next_key_.fetch_add(1);
  // Which CUDA device is not known here; providers with FI_HMEM look the pointer up themselves.
  attr.iface = type == MemoryType::kCuda ? FI_HMEM_CUDA : FI_HMEM_SYSTEM;
  fid_mr* mr = nullptr;
  int ret = fi_mr_regattr(domain.get(), &attr, 0, &mr);
  if (ret != 0) {
    return Status::system(errorText("fi_mr_regattr", ret) + " registering " + std::to_string(size) +
                          " bytes");
  }
  FidPtr<fid_mr> owned(mr);
  if ((mr_mode & FI_MR_ENDPOINT) != 0) {
    if (ep == nullptr) return Status::internal("FI_MR_ENDPOINT registration without an endpoint");
    ret = fi_mr_bind(mr, &ep->fid, 0);
    if (ret == 0) ret = fi_mr_enable(mr);
    if (ret != 0) return Status::system(errorText("fi_mr_bind/enable", ret));
  }
  *out = std::move(owned);
  return Status::ok();
}

Status openDomains(const FabricApi* api, const OfiOptions& options,
                   std::vector<std::shared_ptr<Domain>>* out) {
  InfoPtr list(nullptr, InfoDeleter{api});
  // CUDA memory needs FI_HMEM for the data and RMA reads for iflush's read-back (GPUs before
  // Hopper): a provider with FI_HMEM but no reads is used for host memory only.
  bool hmem = true;
  bool rma = true;
  TALLY_RETURN_IF_ERROR(queryInfo(api, options, /*hmem=*/true, /*rma=*/true, &list));
  if (!list) {
    hmem = false;
    rma = options.read_back;
    TALLY_RETURN_IF_ERROR(queryInfo(api, options, /*hmem=*/false, rma, &list));
  }
  if (!list) {
    return Status::invalidUsage(
        "no libfabric provider offers reliable tagged messaging (FI_EP_RDM, FI_TAGGED)" +
        (options.provider.empty() ? std::string() : " for provider '" + options.provider + "'") +
        "; fi_info -t FI_EP_RDM lists what this host has");
  }
  const std::string provider = list->fabric_attr->prov_name ? list->fabric_attr->prov_name : "";
  const std::vector<std::string> wanted = splitList(options.domains);
  // The first entry of each domain of the first provider, in libfabric's order.
  std::vector<const fi_info*> picked;
  std::vector<std::string> seen;
  for (const fi_info* info = list.get(); info != nullptr; info = info->next) {
    if (info->fabric_attr->prov_name == nullptr || provider != info->fabric_attr->prov_name) {
      continue;
    }
    const std::string name = info->domain_attr->name ? info->domain_attr->name : "";
    bool known = false;
    for (const std::string& s : seen) known = known || s == name;
    if (known) continue;
    seen.push_back(name);
    bool want = wanted.empty();
    for (const std::string& w : wanted) want = want || w == name;
    if (want) picked.push_back(info);
  }
  if (wanted.empty()) {
    std::vector<const fi_info*> others;
    for (const fi_info* info : picked) {
      if (!isLoopback(info->domain_attr->name, numericAddress(*info))) others.push_back(info);
    }
    if (!others.empty()) picked = others;
  }
  std::string all;
  for (const std::string& s : seen) all += (all.empty() ? "" : ",") + s;
  if (picked.empty()) {
    return Status::invalidUsage("ofi provider " + provider + " has no domain named in '" +
                                options.domains + "' (it has: " + all + ")");
  }
  std::vector<std::shared_ptr<Domain>> domains;
  for (const fi_info* info : picked) {
    std::shared_ptr<Domain> domain;
    TALLY_RETURN_IF_ERROR(openOne(api, *info, hmem, rma, options, &domain));
    domains.push_back(std::move(domain));
  }
  TALLY_INFO(log::kNet | log::kInit,
             "ofi: provider %s (libfabric %s; domains %s; %s; mr_mode 0x%llx)",
             provider.c_str(), api->libraryVersion().c_str(), all.c_str(),
             hmem ? "FI_HMEM: can send CUDA memory" : "no FI_HMEM: host memory only",
             static_cast<unsigned long long>(domains.front()->mr_mode));
  *out = std::move(domains);
  return Status::ok();
}

DeviceProperties domainProperties(const Domain& domain) {
  DeviceProperties properties;
  properties.name = domain.name;
  properties.address = domain.address;
  properties.guid = hashName(domain.provider + "/" + domain.name);
  const fid_nic* nic = domain.info->nic;
  if (nic != nullptr && nic->bus_attr != nullptr && nic->bus_attr->bus_type == FI_BUS_PCI) {
    const fi_pci_attr& pci = nic->bus_attr->attr.pci;
    char path[96];
    std::snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.%x", pci.domain_id,
                  pci.bus_id, pci.device_id, pci.function_id);
    properties.pci_path = realPath(path);
  }
  if (properties.pci_path.empty()) {
    properties.pci_path = realPath("/sys/class/net/" + domain.name + "/device");
  }
  if (nic != nullptr && nic->link_attr != nullptr && nic->link_attr->speed > 0) {
    properties.speed_mbps = static_cast<int>(nic->link_attr->speed / 1000000);
  }
  if (properties.speed_mbps <= 0) properties.speed_mbps = tcp::linkSpeedMbps(domain.name);
  if (properties.speed_mbps <= 0) properties.speed_mbps = kDefaultSpeedMbps;
  properties.cuda_memory = domain.hmem && domain.rma_read;
  return properties;
}

}  // namespace tally::transport::ofi
