// SPDX-License-Identifier: Apache-2.0
// What tables_net.cc and tables_coll.cc share: the export marker, the name both tables carry, and
// the property layouts of other versions filled from the v11 one the entry points produce.
//
// The library is built with -fvisibility=hidden and a version script (exports.map), and only the
// versioned tables carry TALLY_EXPORT. Each table is defined with the single-declaration form
// `extern "C" TALLY_EXPORT const T x = ...;`: in C++ a namespace-scope const object otherwise has
// internal linkage and nothing is exported.
//
// Property layouts: v8 lacks forceFlush, vProps, maxP2pBytes, maxCollBytes and
// maxMultiRequestSize; v9 (= v10) lacks only the last. v12 has room for 8 devices per virtual NIC
// and adds railId and planeId.
#pragma once

#include <cstring>

#include "plugin/abi/abi.h"

#define TALLY_EXPORT __attribute__((visibility("default")))

namespace tally::plugin {

inline constexpr const char* kPluginName = "Tally";

inline void toPropertiesV8(const ncclNetProperties_v11_t& in, ncclNetProperties_v8_t* out) {
  out->name = in.name;
  out->pciPath = in.pciPath;
  out->guid = in.guid;
  out->ptrSupport = in.ptrSupport;
  out->regIsGlobal = in.regIsGlobal;
  out->speed = in.speed;
  out->port = in.port;
  out->latency = in.latency;
  out->maxComms = in.maxComms;
  out->maxRecvs = in.maxRecvs;
  out->netDeviceType = in.netDeviceType;
  out->netDeviceVersion = in.netDeviceVersion;
}

inline void toPropertiesV9(const ncclNetProperties_v11_t& in, ncclNetProperties_v9_t* out) {
  out->name = in.name;
  out->pciPath = in.pciPath;
  out->guid = in.guid;
  out->ptrSupport = in.ptrSupport;
  out->regIsGlobal = in.regIsGlobal;
  out->forceFlush = in.forceFlush;
  out->speed = in.speed;
  out->port = in.port;
  out->latency = in.latency;
  out->maxComms = in.maxComms;
  out->maxRecvs = in.maxRecvs;
  out->netDeviceType = in.netDeviceType;
  out->netDeviceVersion = in.netDeviceVersion;
  out->vProps = in.vProps;
  out->maxP2pBytes = in.maxP2pBytes;
  out->maxCollBytes = in.maxCollBytes;
}

// NCCL passes an uninitialized struct and reads every field, so all 128 bytes are written: the
// padding after vProps and its unused devs are 0. Tally knows no rails or planes, so both ids are
// NCCL_NET_ID_UNDEF, which NCCL ignores.
inline void toPropertiesV12(const ncclNetProperties_v11_t& in, ncclNetProperties_v12_t* out) {
  ncclNetProperties_v12_t p;
  std::memset(&p, 0, sizeof(p));
  p.name = in.name;
  p.pciPath = in.pciPath;
  p.guid = in.guid;
  p.ptrSupport = in.ptrSupport;
  p.regIsGlobal = in.regIsGlobal;
  p.forceFlush = in.forceFlush;
  p.speed = in.speed;
  p.port = in.port;
  p.latency = in.latency;
  p.maxComms = in.maxComms;
  p.maxRecvs = in.maxRecvs;
  p.netDeviceType = in.netDeviceType;
  p.netDeviceVersion = in.netDeviceVersion;
  p.vProps.ndevs = in.vProps.ndevs;
  for (int i = 0; i < in.vProps.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC; ++i) {
    p.vProps.devs[i] = in.vProps.devs[i];
  }
  p.maxP2pBytes = in.maxP2pBytes;
  p.maxCollBytes = in.maxCollBytes;
  p.maxMultiRequestSize = in.maxMultiRequestSize;
  p.railId = NCCL_NET_ID_UNDEF;
  p.planeId = NCCL_NET_ID_UNDEF;
  // memcpy, not assignment: a struct assignment need not copy the padding bytes.
  std::memcpy(out, &p, sizeof(p));
}

// getProperties adapters for a v11 entry point `Get` (net or CollNet).
template <ncclResult_t (*Get)(int, ncclNetProperties_v11_t*)>
ncclResult_t getPropertiesV8(int dev, ncclNetProperties_v8_t* props) {
  if (props == nullptr) return ncclInternalError;
  ncclNetProperties_v11_t p;
  ncclResult_t r = Get(dev, &p);
  if (r == ncclSuccess) toPropertiesV8(p, props);
  return r;
}

template <ncclResult_t (*Get)(int, ncclNetProperties_v11_t*)>
ncclResult_t getPropertiesV9(int dev, ncclNetProperties_v9_t* props) {
  if (props == nullptr) return ncclInternalError;
  ncclNetProperties_v11_t p;
  ncclResult_t r = Get(dev, &p);
  if (r == ncclSuccess) toPropertiesV9(p, props);
  return r;
}

template <ncclResult_t (*Get)(int, ncclNetProperties_v11_t*)>
ncclResult_t getPropertiesV12(int dev, ncclNetProperties_v12_t* props) {
  if (props == nullptr) return ncclInternalError;
  ncclNetProperties_v11_t p;
  ncclResult_t r = Get(dev, &p);
  if (r == ncclSuccess) toPropertiesV12(p, props);
  return r;
}

}  // namespace tally::plugin
