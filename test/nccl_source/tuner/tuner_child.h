// SPDX-License-Identifier: Apache-2.0
// The NCCL side of the tuner tests: one communicator's net and tuner, loaded by NCCL's own loader
// and tuner loader (compiled from one NCCL version's source) in the order ncclCommInitRank runs
// them, and NCCL's calls into the tuner as its enqueue code makes them. No NCCL type appears here;
// tuner_child.cc holds the NCCL side, so the C++20 test driver can include this.
//
// Each process may hold one TunerComm at a time: NCCL's loaders keep their state in process-wide
// statics set up once, so every case of the tests runs in a fresh process.
#pragma once

#include <cstddef>
#include <string>

namespace tally::nccl_source {

// NCCL_VERSION_CODE of the NCCL this was compiled from.
int tunerNcclVersionCode();
// The cost table's dimensions in that NCCL (NCCL_NUM_ALGORITHMS x NCCL_NUM_PROTOCOLS).
int tunerNumAlgorithms();
int tunerNumProtocols();
// Whether that NCCL hands the tuner its cost table (2.28 on: ncclTuner_t is v5 or v6), or asks it
// to pick an algorithm and a protocol (before: ncclTuner_t is v2).
bool tunerTakesCostTable();

struct TunerLoad {
  int rc = -1;                  // the first failing ncclResult_t of net init, load and init; 0
  const void* table = nullptr;  // the tuner table NCCL keeps (comm->tuner); null for none
  std::string name;             // its name
  bool chunk_size = false;      // NCCL can ask it for chunk sizes (getChunkSize set)
};

struct TunerComm;

// A communicator of n_ranks on n_nodes: NCCL's net init (its process-wide plugin init first on
// NCCL before the plugin folder, as ncclInit does), then NCCL's tuner load and the tuner's init
// as ncclCommInitRank calls them. Returns the communicator, with what happened in *load.
TunerComm* tunerCommCreate(int n_ranks, int n_nodes, TunerLoad* load);

// getCollInfo as NCCL's enqueue calls it for one collective of `bytes` (coll is an ncclFunc_t).
// With a cost table, `table` is the NCCL-shaped table, edited in place, and *algorithm and
// *protocol are left -1. Before that, `collnet_support` is passed, the table is not, and the pick
// comes back in *algorithm and *protocol (-1: the tuner leaves it to NCCL). Without a tuner,
// nothing is called. Returns the tuner's ncclResult_t (0 without a tuner).
int tunerCollInfo(TunerComm* comm, int coll, size_t bytes, float* table, int collnet_support,
                  int* algorithm, int* protocol);

// getChunkSize as NCCL 2.30's chunking calls it, *chunk holding NCCL's own chunk on entry. Returns
// -1 when NCCL would not call it (no tuner, or a tuner without getChunkSize), else the tuner's
// ncclResult_t.
int tunerChunkSize(TunerComm* comm, int coll, size_t bytes, int algo, int proto, int n_channels,
                   size_t* chunk);

// The tuner's finalize, NCCL's tuner unload and its net finalize, as ncclCommDestroy runs them.
// Returns the first failing ncclResult_t, or 0.
int tunerCommDestroy(TunerComm* comm);

}  // namespace tally::nccl_source
