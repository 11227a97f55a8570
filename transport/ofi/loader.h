// SPDX-License-Identifier: Apache-2.0
// libfabric, loaded at run time.
//
// Tally never links libfabric: libfabric.so.1 is dlopen'ed the first time the ofi transport is
// asked for, so one build runs on hosts without it. Only a handful of functions are exported
// symbols (below); everything else Tally calls (fi_domain, fi_endpoint, fi_tsend, fi_cq_read,
// fi_mr_reg, fi_close, ...) is an inline in <rdma/fi_*.h> that goes through the ops tables of the
// objects those functions return, so it needs no symbol. Header inlines that call an exported
// function (fi_allocinfo calls fi_dupinfo) must not be used: go through this table instead. A
// build that slips shows up as an undefined reference when a test binary links.
//
// The symbols are looked up with the ABI version the headers were written for (kFabricAbi), as
// the static linker would bind them, so a newer library's layouts are never read with older
// declarations.
#pragma once

#include <rdma/fabric.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace tally::transport::ofi {

inline constexpr const char* kFabricLibrary = "libfabric.so.1";
// The oldest library Tally asks for (fi_getinfo's version argument never goes below it): FI_HMEM
// and the mr_mode bits Tally reads exist from 1.10 on.
inline constexpr uint32_t kMinApiVersion = FI_VERSION(1, 10);

// The exported libfabric functions Tally calls; every pointer is non-null in a table returned by
// loadFabric(). Immutable once loaded; safe to use from any thread.
struct FabricApi {
  int (*getinfo)(uint32_t version, const char* node, const char* service, uint64_t flags,
                 const fi_info* hints, fi_info** info) = nullptr;
  void (*freeinfo)(fi_info* info) = nullptr;
  // dupinfo(nullptr) allocates an empty fi_info (what the header's fi_allocinfo does).
  fi_info* (*dupinfo)(const fi_info* info) = nullptr;
  int (*fabric)(fi_fabric_attr* attr, fid_fabric** fabric, void* context) = nullptr;
  const char* (*strerror)(int errnum) = nullptr;
  uint32_t (*version)() = nullptr;

  // The version to pass to getinfo: what the headers know, lowered to what the library is.
  uint32_t apiVersion() const;
  // "1.17"
  std::string libraryVersion() const;
  // "Connection refused (-111)" for a negative libfabric return code.
  std::string errorText(int ret) const;

  void* handle = nullptr;  // the dlopen handle; closed with the table
  ~FabricApi();
};

// The process-wide table, loading kFabricLibrary on first use (thread-safe, loaded once; a
// failure is remembered and returned again). Fails with kInvalidUsage when the library is
// missing ("libfabric.so.1 not found: ...") and kInternal when it lacks a symbol or is older than
// kMinApiVersion, naming which.
Status loadFabric(const FabricApi** out);

// Loads `library` into a table of its own, the same checks; for tests (a missing or wrong
// library).
Status loadFabricFrom(const std::string& library, std::unique_ptr<FabricApi>* out);

}  // namespace tally::transport::ofi
