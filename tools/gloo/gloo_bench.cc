// SPDX-License-Identifier: Apache-2.0
// tally-gloo-bench: one rank of Gloo's ring-chunked and halving-doubling all-reduce, the baseline
// `tally bench` runs beside Tally on the same links and sizes (docs/gloo.md).
//
//   tally-gloo-bench --rank R --nranks N --store DIR --address IP
//                    [--algo ring_chunked|halving_doubling|both] --sizes 256K,1M,...
//                    [--iters 5] [--warmup 2] [--check] [--timeout 120s] [--prefix gloo]
//
// Rank 0 prints one JSON object per line on stdout per (algorithm, size), flushed as each is
// done; other ranks print nothing on stdout. Exit status: 0 when every row was measured (wrong
// elements are reported in the rows, not in the status), 2 for bad arguments, 1 when Gloo fails
// (rendezvous, a lost peer, a timeout); the reason is on stderr.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "common/sizes.h"
#include "tools/gloo/gloo_options.h"
#include "tools/gloo/gloo_runner.h"

namespace {

using namespace tally;
using namespace tally::gloo_bench;

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// Turns a tally parser into a CLI11 validator that also stores the parsed value.
template <typename Parse>
CLI::Validator parsedBy(const char* what, Parse&& parse) {
  return CLI::Validator(
      [parse](std::string& text) {
        const Status parsed = parse(text);
        return parsed.isOk() ? std::string() : parsed.message();
      },
      what);
}

int run(const BenchOptions& options) {
  for (GlooAlgo algo : options.algos) {
    std::unique_ptr<GlooGroup> group;
    Status st = GlooGroup::connect(options, algo, &group);
    for (size_t i = 0; st.isOk() && i < options.sizes.size(); ++i) {
      BenchRow row;
      st = group->measure(options.sizes[i], &row);
      if (st.isOk() && options.rank == 0) {
        std::printf("%s\n", rowJson(row).c_str());
        std::fflush(stdout);
      }
    }
    if (st.isOk()) st = group->finish();
    if (!st.isOk()) {
      std::fprintf(stderr, "tally-gloo-bench: rank %d of %d: %s\n", options.rank, options.nranks,
                   st.toString().c_str());
      return kExitFailed;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions options;
  std::string algo_text = "both";
  std::string sizes_text;
  std::string timeout_text = "120s";

  CLI::App app{"One rank of Gloo's ring-chunked and halving-doubling all-reduce (float32 sum)."};
  app.add_option("--rank", options.rank, "this process's rank")->required();
  app.add_option("--nranks", options.nranks, "number of ranks")->required();
  app.add_option("--store", options.store, "FileStore directory shared by every rank")->required();
  app.add_option("--address", options.address, "IP address the TCP device binds to")->required();
  app.add_option("--algo", algo_text, "ring_chunked, halving_doubling or both")
      ->capture_default_str()
      ->check(parsedBy("ALGO",
                       [&options](const std::string& t) { return parseAlgos(t, &options.algos); }));
  app.add_option("--sizes", sizes_text, "comma-separated sizes in bytes: 256K,1M,4100")
      ->required()
      ->check(parsedBy("SIZES",
                       [&options](const std::string& t) { return parseSizes(t, &options.sizes); }));
  app.add_option("--iters", options.iters, "timed iterations per size")->capture_default_str();
  app.add_option("--warmup", options.warmup, "warm-up iterations per size")->capture_default_str();
  app.add_flag("--check", options.check,
               "compare each warm-up result and the last timed one with the expected sum");
  app.add_option("--timeout", timeout_text,
                 "bound on every Gloo wait, with a unit: 500ms, 30s, 2m (a bare number is "
                 "refused)")
      ->capture_default_str()
      ->check(parsedBy("DURATION", [&options](const std::string& t) {
        return parseDurationMs(t, DurationUnit::kNone, &options.timeout_ms);
      }));
  app.add_option("--prefix", options.prefix,
                 "store key prefix; runs sharing one --store directory need different ones")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  // The validators above fill algos only when --algo is given; "both" is the default.
  if (options.algos.empty()) (void)parseAlgos(algo_text, &options.algos);
  const Status valid = validate(options);
  if (!valid.isOk()) {
    std::fprintf(stderr, "tally-gloo-bench: %s\n", valid.message().c_str());
    return kExitUsage;
  }

  // gloo_runner turns Gloo's exceptions into Status; this catches whatever else escapes
  // (allocation failure, a broken invariant) so the reason still reaches stderr.
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tally-gloo-bench: rank %d: %s\n", options.rank, e.what());
    return kExitFailed;
  }
}
