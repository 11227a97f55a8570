// SPDX-License-Identifier: Apache-2.0
// One process of the tuner tests: a communicator set up by NCCL's own loaders (tuner_child.h),
// NCCL's calls into whatever tuner NCCL found, and a report of what came back on stdout for the
// test to check (tuner_test.cc). The inputs, NCCL-shaped cost tables and NCCL's own chunks, are
// made here and again by the test from the same functions.
//
// The report, one line each:
//   load rc=<ncclResult_t> tuner=<name|-> table=<symbol@library|adapter|-> chunk=<0|1>
//   cost shape=<both|chain|none> bytes=<n> rc=<r> algo=<a> proto=<p> table=<hex,...>
//   chunk algo=<a> bytes=<n> in=<NCCL's chunk> out=<after the tuner> rc=<r>
//   fin rc=<ncclResult_t>
//   log <LEVEL> <text>            (every line NCCL and the plugins logged, last)
// where table names the exported symbol NCCL uses as it is (ncclTunerPlugin_v5@<library file>),
// "adapter" for a table of NCCL's own around the plugin's; a cost line's table is the table after
// getCollInfo, each float's bits in hex; algo and proto the tuner's pick (-1 with a cost table).
// A cost line per shape and size; chunk lines (CollNetChain and Ring, Simple, 2 channels) only
// where NCCL asks the tuner for chunks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tally::nccl_source {

// Which CollNet entries NCCL left enabled in the table it passes, and the collNetSupport it
// passes a v2 tuner.
enum class Shape {
  kBoth,   // CollNetDirect and CollNetChain with Simple
  kChain,  // CollNetChain with Simple only
  kNone,   // no CollNet (collNetSupport 0)
};
inline constexpr Shape kShapes[] = {Shape::kBoth, Shape::kChain, Shape::kNone};
const char* shapeName(Shape shape);

// The NCCL-shaped cost table (tunerNumAlgorithms() x tunerNumProtocols(), microseconds) NCCL
// would pass for an all-reduce of `bytes` over n_ranks on n_nodes on a 10 Gb/s net: the ring's
// cheaper protocol at NCCL's own ring cost (model::ncclRingAllReduceMicros), its other protocols
// and the tree dearer, the enabled CollNet entries at a placeholder dearer than all of them, and
// NVLS, NVLS tree, PAT and CollNet's LL and LL128 disabled (-1).
std::vector<float> ncclShapedTable(uint64_t bytes, Shape shape, int n_ranks, int n_nodes);

// The CollNetChain chunk NCCL computes before asking the tuner, on 2 channels with n_ranks /
// n_nodes GPUs per node and NCCL_BUFFSIZE buff_size.
uint64_t ncclChainChunk(uint64_t bytes, int n_ranks, int n_nodes, uint64_t buff_size);

// Runs the communicator and prints the report above. Returns 0 when everything ran (whatever
// NCCL or the tuner returned).
int runTunerReport(int n_ranks, int n_nodes, uint64_t buff_size,
                   const std::vector<uint64_t>& sizes);

}  // namespace tally::nccl_source
