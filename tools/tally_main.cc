// The `tally` command: `tally bench` (all-reduce bandwidth of the reduction server beside a ring
// and Gloo, tools/bench/), `tally demo` (a preset of the bench), `tally env` (every TALLY_
// variable; --markdown prints docs/env.md), and the cluster commands `tally launch`, `tally plan`
// and `tally doctor` (tools/commands/). A bad command line exits 2.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "common/params.h"
#include "tools/bench/bench_command.h"
#include "tools/commands/command.h"
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
    if (value && tally::isSecretParam(p.name)) value = "(secret)";
    std::printf("%-26s %-12s %s\n", p.name, value ? value->c_str() : p.default_value,
                value ? "(environment)" : "(default)");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tally: NCCL reduction server tools"};
  app.require_subcommand(1);

  bool markdown = false;
  CLI::App* env_cmd = app.add_subcommand("env", "List every TALLY_ variable with its value");
  env_cmd->add_flag("--markdown", markdown, "Print the Markdown table of docs/env.md");

  std::vector<tally::commands::Subcommand> commands = {
      tally::bench::addBenchCommand(app),     tally::demo::addDemoCommand(app),
      tally::commands::addLaunchCommand(app), tally::commands::addPlanCommand(app),
      tally::commands::addDoctorCommand(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0 through CLI11; a bad command line exits 2, as usage errors do.
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  if (*env_cmd) return runEnv(markdown);
  for (const auto& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return 2;
}
