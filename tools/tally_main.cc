// The `tally` command: `tally demo` (the reduction server against a ring all-reduce, on loopback),
// `tally env` (every TALLY_ variable; --markdown prints docs/env.md), and the cluster commands
// `tally launch`, `tally plan` and `tally doctor` (tools/commands/).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "common/params.h"
#include "tools/commands/command.h"
#include "tools/commands/paths.h"
#include "tools/demo.h"

namespace {

int runEnv(bool markdown) {
  if (markdown) {
    std::fputs(tally::paramsMarkdown().c_str(), stdout);
    return 0;
  }
  tally::Params params;
  tally::Status s = tally::Params::load(tally::EnvParamSource(), &params);
  if (!s.isOk()) {
    std::fprintf(stderr, "tally env: %s\n", s.toString().c_str());
    return 1;
  }
  tally::EnvParamSource env;
  for (const auto& p : tally::paramRegistry()) {
    auto value = env.get(p.name);
    std::printf("%-26s %-12s %s\n", p.name, value ? value->c_str() : p.default_value,
                value ? "(environment)" : "(default)");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tally: NCCL reduction server tools"};
  app.require_subcommand(1);

  tally::demo::DemoOptions demo;
  std::vector<std::string> sizes;
  CLI::App* demo_cmd = app.add_subcommand(
      "demo",
      "Start reducers and workers on loopback, all-reduce through the plugin, check and time it");
  demo_cmd->add_option("--plugin", demo.plugin,
                       "Path of libnccl-net-tally.so (default: next to tally)");
  demo_cmd->add_option("--reducer", demo.reducer, "Path of tally-reducer (default: next to tally)");
  demo_cmd->add_option("--workers", demo.workers, "Worker processes")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  demo_cmd->add_option("--reducers", demo.reducers, "Reducer processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  demo_cmd
      ->add_option("--sizes", sizes,
                   "Bytes per all-reduce, e.g. 256K,4M,64M (default 256K..64M x4)")
      ->delimiter(',');
  demo_cmd->add_option("--iters", demo.iters, "Timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  demo_cmd->add_option("--warmup", demo.warmup, "Warm-up iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  demo_cmd
      ->add_option("--table-version", demo.table_version,
                   "Plugin table version (8..11; default newest)")
      ->check(CLI::Range(0, 11));
  demo_cmd->add_option("--reducer-threads", demo.reducer_threads,
                       "--threads for each tally-reducer (default: its own)");
  demo_cmd->add_flag("!--no-ring", demo.ring, "Skip the ring all-reduce baseline");
  demo_cmd->add_flag("--verbose", demo.verbose, "Show the plugin's INFO lines");

  bool markdown = false;
  CLI::App* env_cmd = app.add_subcommand("env", "List every TALLY_ variable with its value");
  env_cmd->add_flag("--markdown", markdown, "Print the Markdown table of docs/env.md");

  std::vector<tally::commands::Subcommand> commands = {
      tally::commands::addLaunchCommand(app),
      tally::commands::addPlanCommand(app),
      tally::commands::addDoctorCommand(app),
  };

  CLI11_PARSE(app, argc, argv);

  if (*env_cmd) return runEnv(markdown);
  for (const auto& command : commands) {
    if (command.app->parsed()) return command.run();
  }

  if (demo.plugin.empty()) demo.plugin = tally::commands::defaultPluginPath();
  if (demo.reducer.empty()) demo.reducer = tally::commands::defaultReducerPath();
  if (sizes.empty()) {
    demo.sizes = tally::demo::defaultSizes();
  } else {
    for (const auto& text : sizes) {
      uint64_t bytes = 0;
      tally::Status s = tally::parseBytes(text, &bytes);
      if (!s.isOk() || bytes == 0 || bytes % 4 != 0) {
        std::fprintf(stderr, "tally demo: bad size %s (want a positive multiple of 4 bytes)\n",
                     text.c_str());
        return 2;
      }
      demo.sizes.push_back(bytes);
    }
  }
  return tally::demo::runDemo(demo);
}
