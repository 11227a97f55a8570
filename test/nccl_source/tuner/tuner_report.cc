// SPDX-License-Identifier: Apache-2.0
// One process of the tuner tests (tuner_report.h).
#include "test/nccl_source/tuner/tuner_report.h"

#include <dlfcn.h>
#include <stdio.h>

#include <cstring>

#include "model/collnet.h"
#include "model/cost_table.h"
#include "test/nccl_source/stubs/captured_log.h"
#include "test/nccl_source/tuner/tuner_child.h"

namespace tally::nccl_source {
namespace {

constexpr int kFuncAllReduce = 4;
constexpr int kChannels = 2;

// The exported symbol `table` is, with its library's file name, when NCCL uses the plugin's table
// as it is; "adapter" when the pointer is a table of NCCL's own; "-" for none.
std::string tableName(const void* table) {
  if (table == nullptr) return "-";
  Dl_info info;
  if (dladdr(table, &info) == 0 || info.dli_sname == nullptr || info.dli_saddr != table ||
      std::strncmp(info.dli_sname, "ncclTunerPlugin_v", 17) != 0) {
    return "adapter";
  }
  const char* file = info.dli_fname != nullptr ? info.dli_fname : "?";
  const char* slash = std::strrchr(file, '/');
  return std::string(info.dli_sname) + "@" + (slash != nullptr ? slash + 1 : file);
}

std::string hexBits(const std::vector<float>& table) {
  std::string out;
  for (float f : table) {
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof(bits));
    char word[16];
    std::snprintf(word, sizeof(word), "%s%08x", out.empty() ? "" : ",", bits);
    out += word;
  }
  return out;
}

}  // namespace

const char* shapeName(Shape shape) {
  switch (shape) {
    case Shape::kBoth:
      return "both";
    case Shape::kChain:
      return "chain";
    case Shape::kNone:
      return "none";
  }
  return "?";
}

std::vector<float> ncclShapedTable(uint64_t bytes, Shape shape, int n_ranks, int n_nodes) {
  const int algos = tunerNumAlgorithms();
  const int protos = tunerNumProtocols();
  std::vector<float> table(static_cast<size_t>(algos * protos), model::kIgnoredCost);
  auto at = [&](int algo, int proto) -> float& {
    return table[static_cast<size_t>(algo * protos + proto)];
  };
  model::CollNetSetup net;
  net.ranks = n_ranks;
  net.nodes = n_nodes;
  net.link_mbps = 10000;
  const float ring = static_cast<float>(model::ncclRingAllReduceMicros(net, bytes));
  at(model::kAlgoRing, model::kProtoSimple) = ring;
  at(model::kAlgoRing, model::kProtoLl128) = ring * 1.2f + 1.0f;
  at(model::kAlgoRing, model::kProtoLl) = ring * 1.5f + 2.0f;
  at(model::kAlgoTree, model::kProtoSimple) = ring * 1.3f + 5.0f;
  at(model::kAlgoTree, model::kProtoLl128) = ring * 1.4f + 4.0f;
  at(model::kAlgoTree, model::kProtoLl) = ring * 2.0f + 3.0f;
  const float collnet = ring * 3.0f + 7.0f;
  if (shape == Shape::kBoth) at(model::kAlgoCollNetDirect, model::kProtoSimple) = collnet;
  if (shape != Shape::kNone) at(model::kAlgoCollNetChain, model::kProtoSimple) = collnet;
  return table;
}

uint64_t ncclChainChunk(uint64_t bytes, int n_ranks, int n_nodes, uint64_t buff_size) {
  return model::ncclCollNetChunk(bytes, kChannels, n_ranks / n_nodes, buff_size);
}

int runTunerReport(int n_ranks, int n_nodes, uint64_t buff_size,
                   const std::vector<uint64_t>& sizes) {
  TunerLoad load;
  TunerComm* comm = tunerCommCreate(n_ranks, n_nodes, &load);
  printf("load rc=%d tuner=%s table=%s chunk=%d\n", load.rc,
         load.name.empty() ? "-" : load.name.c_str(), tableName(load.table).c_str(),
         load.chunk_size ? 1 : 0);
  for (Shape shape : kShapes) {
    for (uint64_t bytes : sizes) {
      std::vector<float> table = ncclShapedTable(bytes, shape, n_ranks, n_nodes);
      int algo = -1;
      int proto = -1;
      const int rc = tunerCollInfo(comm, kFuncAllReduce, bytes, table.data(),
                                   shape == Shape::kNone ? 0 : 1, &algo, &proto);
      printf("cost shape=%s bytes=%llu rc=%d algo=%d proto=%d table=%s\n", shapeName(shape),
             static_cast<unsigned long long>(bytes), rc, algo, proto, hexBits(table).c_str());
    }
  }
  for (uint64_t bytes : sizes) {
    // The ring's chunk is one step of NCCL's buffer; the tuner must leave it alone.
    const std::pair<int, uint64_t> probes[] = {
        {model::kAlgoCollNetChain, ncclChainChunk(bytes, n_ranks, n_nodes, buff_size)},
        {model::kAlgoRing, buff_size / model::kNcclSteps}};
    for (const auto& [algo, in] : probes) {
      size_t chunk = in;
      const int rc =
          tunerChunkSize(comm, kFuncAllReduce, bytes, algo, model::kProtoSimple, kChannels, &chunk);
      if (rc == -1) break;  // NCCL would not ask
      printf("chunk algo=%d bytes=%llu in=%llu out=%llu rc=%d\n", algo,
             static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(in),
             static_cast<unsigned long long>(chunk), rc);
    }
  }
  printf("fin rc=%d\n", tunerCommDestroy(comm));
  for (const std::string& line : capturedLog()) printf("log %s\n", line.c_str());
  fflush(stdout);
  return 0;
}

}  // namespace tally::nccl_source
