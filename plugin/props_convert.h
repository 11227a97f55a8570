// Older property layouts, filled from the v11 one the entry points produce. v8 lacks forceFlush,
// vProps, maxP2pBytes, maxCollBytes and maxMultiRequestSize; v9 (= v10) lacks only the last.
#pragma once

#include "plugin/abi/abi.h"

namespace tally::plugin {

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

}  // namespace tally::plugin
