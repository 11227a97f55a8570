// SPDX-License-Identifier: Apache-2.0
// The NCCL side of the tuner tests (tuner_child.h): compiled against one NCCL version's headers and
// linked with that version's net loader and tuner loader, so which library and which table the
// tuner comes from is NCCL's decision.
#include "test/nccl_source/tuner/tuner_child.h"

#include <stdlib.h>

#include "comm.h"
#include "net.h"
#include "tuner.h"

#ifndef TALLY_NCCL_PLUGIN_FOLDER_LOADER
#error "the build says which loader this NCCL has"
#endif

namespace tally::nccl_source {

// A communicator as NCCL's init has it by the time it loads the net and the tuner; the rest of
// NCCL's struct stays zero, which is what the loaders expect of fields they do not set.
struct TunerComm {
  ncclComm* nccl = nullptr;
};

int tunerNcclVersionCode() { return NCCL_VERSION_CODE; }
int tunerNumAlgorithms() { return NCCL_NUM_ALGORITHMS; }
int tunerNumProtocols() { return NCCL_NUM_PROTOCOLS; }

bool tunerTakesCostTable() {
#if NCCL_VERSION_CODE >= 22800
  return true;
#else
  return false;
#endif
}

TunerComm* tunerCommCreate(int n_ranks, int n_nodes, TunerLoad* load) {
  auto* comm = new TunerComm;
  comm->nccl = static_cast<ncclComm*>(calloc(1, sizeof(ncclComm)));
  ncclComm* c = comm->nccl;
  c->nRanks = n_ranks;
  c->nNodes = n_nodes;
  c->commHash = 0x7a11700000000001ull;
  c->config.netName = getenv("NCCL_NET");
#if NCCL_VERSION_CODE >= 22600
  c->config.trafficClass = NCCL_CONFIG_UNDEF_INT;
#endif
  ncclResult_t rc = ncclSuccess;
#if !TALLY_NCCL_PLUGIN_FOLDER_LOADER
  // ncclInit loads the net plugin once per process before any communicator.
  rc = ncclNetPluginInit();
#endif
  if (rc == ncclSuccess) rc = ncclNetInit(c);
#if NCCL_VERSION_CODE >= 22800
  if (rc == ncclSuccess) rc = ncclTunerPluginLoad(c);
  if (rc == ncclSuccess && c->tuner != nullptr) {
    rc = c->tuner->init(&c->tunerContext, c->commHash, c->nRanks, c->nNodes, ncclDebugLog,
                        &c->nvlDomainInfo, &c->tunerConstants);
  }
#else
  if (rc == ncclSuccess) rc = ncclTunerPluginLoad(&c->tuner);
  if (rc == ncclSuccess && c->tuner != nullptr) {
    rc = c->tuner->init(c->nRanks, c->nNodes, ncclDebugLog, &c->tunerContext);
  }
#endif
  load->rc = static_cast<int>(rc);
  load->table = c->tuner;
  load->name = c->tuner != nullptr && c->tuner->name != nullptr ? c->tuner->name : "";
#if NCCL_VERSION_CODE >= 23000
  load->chunk_size = c->tuner != nullptr && c->tuner->getChunkSize != nullptr;
#else
  load->chunk_size = false;
#endif
  return comm;
}

int tunerCollInfo(TunerComm* comm, int coll, size_t bytes, float* table, int collnet_support,
                  int* algorithm, int* protocol) {
  ncclComm* c = comm->nccl;
  *algorithm = NCCL_ALGO_UNDEF;
  *protocol = NCCL_PROTO_UNDEF;
  if (c->tuner == nullptr) return ncclSuccess;
  int n_channels = 0;
  // One operation in the group, no registered buffer, no NVLink SHARP: a plain all-reduce.
#if NCCL_VERSION_CODE >= 22800
  (void)collnet_support;
  return c->tuner->getCollInfo(c->tunerContext, static_cast<ncclFunc_t>(coll), bytes,
                               /*numPipeOps=*/1, reinterpret_cast<float**>(table),
                               NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, /*regBuff=*/0, &n_channels);
#else
  (void)table;
  return c->tuner->getCollInfo(c->tunerContext, static_cast<ncclFunc_t>(coll), bytes,
                               collnet_support, /*nvlsSupport=*/0, /*numPipeOps=*/1, algorithm,
                               protocol, &n_channels);
#endif
}

int tunerChunkSize(TunerComm* comm, int coll, size_t bytes, int algo, int proto, int n_channels,
                   size_t* chunk) {
#if NCCL_VERSION_CODE >= 23000
  ncclComm* c = comm->nccl;
  if (c->tuner == nullptr || c->tuner->getChunkSize == nullptr) return -1;
  return c->tuner->getChunkSize(c->tunerContext, static_cast<ncclFunc_t>(coll), bytes, algo, proto,
                                n_channels, chunk);
#else
  (void)comm, (void)coll, (void)bytes, (void)algo, (void)proto, (void)n_channels, (void)chunk;
  return -1;
#endif
}

int tunerCommDestroy(TunerComm* comm) {
  ncclComm* c = comm->nccl;
  ncclResult_t rc = ncclSuccess;
#if NCCL_VERSION_CODE >= 22800
  if (c->tuner != nullptr) {
    rc = c->tuner->finalize(c->tunerContext);
    const ncclResult_t unloaded = ncclTunerPluginUnload(c);
    if (rc == ncclSuccess) rc = unloaded;
  }
#else
  if (c->tuner != nullptr) {
    rc = c->tuner->destroy(c->tunerContext);
    const ncclResult_t unloaded = ncclTunerPluginUnload(&c->tuner);
    if (rc == ncclSuccess) rc = unloaded;
  }
#endif
#if TALLY_NCCL_PLUGIN_FOLDER_LOADER
  if (c->ncclNet != nullptr) {
    const ncclResult_t net = ncclNetFinalize(c);
    if (rc == ncclSuccess) rc = net;
  }
#endif
  free(c);
  delete comm;
  return static_cast<int>(rc);
}

}  // namespace tally::nccl_source
