// SPDX-License-Identifier: Apache-2.0
#include "transport/ofi/loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <mutex>

namespace tally::transport::ofi {
namespace {

// The symbol versions the 1.17 headers' declarations belong to, as `objdump -T libfabric.so.1`
// lists them with "@@" (the default a link-time binding would pick). Newer libraries keep these
// versions for compatibility.
struct SymbolSpec {
  const char* name;
  const char* abi;
};
constexpr SymbolSpec kGetinfo = {"fi_getinfo", "FABRIC_1.3"};
constexpr SymbolSpec kFreeinfo = {"fi_freeinfo", "FABRIC_1.3"};
constexpr SymbolSpec kDupinfo = {"fi_dupinfo", "FABRIC_1.3"};
constexpr SymbolSpec kFabric = {"fi_fabric", "FABRIC_1.1"};
constexpr SymbolSpec kStrerror = {"fi_strerror", "FABRIC_1.0"};
constexpr SymbolSpec kVersion = {"fi_version", "FABRIC_1.0"};

template <typename Fn>
Status lookup(void* handle, const std::string& library, const SymbolSpec& spec, Fn* slot) {
  dlerror();
  void* symbol = dlvsym(handle, spec.name, spec.abi);
  if (symbol == nullptr) {
    const char* why = dlerror();
    return Status::internal(
        library + " has no " + spec.name + "@" + spec.abi + " (" +
        (why != nullptr ? why : "not found") +
        "): it is not libfabric, or one too old for Tally (needs 1.10 or later)");
  }
  // POSIX guarantees that a dlsym'ed object pointer converts to the function's pointer type.
  *slot = reinterpret_cast<Fn>(symbol);
  return Status::ok();
}

Status fill(void* handle, const std::string& library, FabricApi* api) {
  TALLY_RETURN_IF_ERROR(lookup(handle, library, kGetinfo, &api->getinfo));
  TALLY_RETURN_IF_ERROR(lookup(handle, library, kFreeinfo, &api->freeinfo));
  TALLY_RETURN_IF_ERROR(lookup(handle, library, kDupinfo, &api->dupinfo));
  TALLY_RETURN_IF_ERROR(lookup(handle, library, kFabric, &api->fabric));
  TALLY_RETURN_IF_ERROR(lookup(handle, library, kStrerror, &api->strerror));
  TALLY_RETURN_IF_ERROR(lookup(handle, library, kVersion, &api->version));
  if (api->version() < kMinApiVersion) {
    return Status::internal(library + " is libfabric " + api->libraryVersion() +
                            "; Tally needs 1.10 or later");
  }
  return Status::ok();
}

}  // namespace

uint32_t FabricApi::apiVersion() const {
  return std::min<uint32_t>(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), version());
}

std::string FabricApi::libraryVersion() const {
  const uint32_t v = version();
  return std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
}

std::string FabricApi::errorText(int ret) const {
  const int positive = ret < 0 ? -ret : ret;
  return std::string(strerror(positive)) + " (" + std::to_string(ret) + ")";
}

FabricApi::~FabricApi() {
  if (handle != nullptr) dlclose(handle);
}

Status loadFabricFrom(const std::string& library, std::unique_ptr<FabricApi>* out) {
  // RTLD_LOCAL: the symbols stay out of the global namespace, so a copy of libfabric the
  // application loads itself (another NCCL plugin) does not clash with ours.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status::invalidUsage(library + " not found: " + (why != nullptr ? why : "unknown") +
                                "; the ofi transport needs libfabric (package libfabric1)");
  }
  auto api = std::make_unique<FabricApi>();
  api->handle = handle;
  TALLY_RETURN_IF_ERROR(fill(handle, library, api.get()));
  *out = std::move(api);
  return Status::ok();
}

Status loadFabric(const FabricApi** out) {
  static std::once_flag once;
  // Never freed: the table and the library stay until exit, so no static destructor unloads
  // them under a helper thread still inside a provider.
  static const FabricApi* api = nullptr;
  static const Status* result = nullptr;
  std::call_once(once, [] {
    std::unique_ptr<FabricApi> loaded;
    result = new Status(loadFabricFrom(kFabricLibrary, &loaded));
    api = loaded.release();
  });
  TALLY_RETURN_IF_ERROR(*result);
  *out = api;
  return Status::ok();
}

}  // namespace tally::transport::ofi
