// SPDX-License-Identifier: Apache-2.0
// tally launch [--dry-run] -- CMD ARGS...
//
// The one container entrypoint for every worker pool of a job: works out this replica's role
// from CLUSTER_SPEC or TF_CONFIG (launch_plan.h), reports what it does on stderr and execs CMD
// with the job's environment, or tally-reducer in the reducer pool. --dry-run prints the plan as
// a shell script instead and runs nothing.
//
// Exit status (when nothing is exec'ed): 0 after --dry-run, 2 for a usage error or a malformed
// spec, 127 when the exec fails or, in the reducer pool, the image has no tally-reducer.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/cli_usage.h"
#include "common/params.h"
#include "tools/commands/command.h"
#include "tools/commands/launch_plan.h"
#include "tools/commands/paths.h"

namespace tally::commands {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitExecFailed = 127;  // what a shell returns for a command it cannot run

struct LaunchOptions {
  bool dry_run = false;
  std::vector<std::string> command;
};

// Applies the plan's environment to this process, then replaces it with argv. Returns only when
// the exec failed.
int execPlan(const LaunchPlan& plan) {
  for (const EnvChange& change : plan.env) {
    int rc = 0;
    switch (change.kind) {
      case EnvChange::Kind::kSet:
        rc = ::setenv(change.name.c_str(), change.value.c_str(), 1);
        break;
      case EnvChange::Kind::kKept:
        break;
      case EnvChange::Kind::kUnset:
        rc = ::unsetenv(change.name.c_str());
        break;
    }
    if (rc != 0) {
      std::fprintf(stderr, "tally launch: cannot set %s: %s\n", change.name.c_str(),
                   std::strerror(errno));
      return kExitExecFailed;
    }
  }
  std::vector<char*> argv;
  argv.reserve(plan.argv.size() + 1);
  for (const std::string& arg : plan.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execvp(argv[0], argv.data());
  const int err = errno;
  std::fprintf(stderr, "tally launch: cannot run %s: %s\n", plan.argv[0].c_str(),
               std::strerror(err));
  return kExitExecFailed;
}

// defaultPluginPath() as NCCL_NET_PLUGIN should read: absolute, without "bin/../".
std::string pluginPath() {
  return std::filesystem::path(defaultPluginPath()).lexically_normal().string();
}

int runLaunch(const LaunchOptions& options) {
  LaunchPlan plan;
  Status st = planLaunchFromEnvironment(EnvParamSource(), pluginPath(), defaultReducerPath(),
                                        options.command, &plan);
  if (!st.isOk()) {
    std::fprintf(stderr, "tally launch: %s\n", st.message().c_str());
    return kExitUsage;
  }
  // NCCL only warns about a plugin it cannot load and carries on without CollNet.
  for (const EnvChange& change : plan.env) {
    // Only a path: "none" (an evaluator's) names no library.
    if (change.kind == EnvChange::Kind::kSet && change.name == "NCCL_NET_PLUGIN" &&
        change.value.find('/') != std::string::npos && ::access(change.value.c_str(), R_OK) != 0) {
      plan.notes.push_back("WARNING: the plugin " + change.value +
                           " is missing: NCCL will run without Tally");
    }
  }
  // Only the reducer image (or the tally-reducer package) has tally-reducer; a training image in
  // the reducer pool would otherwise end in a bare "cannot run".
  std::string no_reducer;
  if (plan.role == ClusterRole::kReducer && !plan.argv.empty() &&
      ::access(plan.argv[0].c_str(), X_OK) != 0) {
    no_reducer = "this image has no tally-reducer (" + plan.argv[0] +
                 "): run the reducer pool on the reducer image (docker/reducer.Dockerfile), or "
                 "install the tally-reducer package in this one";
  }
  if (options.dry_run) {
    if (!no_reducer.empty()) plan.notes.push_back("WARNING: " + no_reducer);
    std::fputs(dryRunText(plan).c_str(), stdout);
    return 0;
  }
  if (!no_reducer.empty()) {
    std::fprintf(stderr, "tally launch: %s\ntally launch: cannot run the reducer: %s\n",
                 plan.summary.c_str(), no_reducer.c_str());
    return kExitExecFailed;  // what the exec would have returned
  }
  for (const std::string& line : reportLines(plan)) {
    std::fprintf(stderr, "tally launch: %s\n", line.c_str());
  }
  return execPlan(plan);
}

}  // namespace

Subcommand addLaunchCommand(CLI::App& parent) {
  auto options = std::make_shared<LaunchOptions>();
  Subcommand cmd;
  cmd.app = parent.add_subcommand(
      "launch",
      "Container entrypoint for every worker pool: set up NCCL and Tally from CLUSTER_SPEC or "
      "TF_CONFIG and exec CMD (tally-reducer in the reducer pool)");
  cmd.app->add_flag("--dry-run", options->dry_run,
                    "Print the role and the environment as shell export lines; run nothing");
  // After `--` CLI11 hands every word to this positional, options and further `--` included.
  // Without `--` an option of CMD would be taken apart (CLI11 sets unknown options aside out of
  // order), so anything set aside is refused with a hint instead of run in the wrong order.
  cmd.app->add_option("command", options->command, "The command to run and its arguments");
  cmd.app->allow_extras();
  cmd.app->footer(
      "Put -- before the command: tally launch [--dry-run] -- CMD ARGS...  (docs/launch.md)");
  cmd.run = [options, app = cmd.app] {
    std::vector<std::string> stray;
    for (const std::string& arg : app->remaining()) {
      if (arg != "--") stray.push_back(arg);  // the `--` itself is left in remaining()
    }
    if (!stray.empty()) {
      // A mistyped option of launch's own names the nearest; either way, the command's own
      // options belong after `--`.
      const std::string& word = stray.front();
      const std::string what = !word.empty() && word[0] == '-'
                                   ? cli::strayWordMessage(*app, word)
                                   : word + " is not an option of launch";
      const bool guessed = what.back() == '?';
      std::fprintf(stderr,
                   "tally launch: %s%s put `--` before the command: "
                   "tally launch [--dry-run] -- CMD ARGS...\n",
                   what.c_str(), guessed ? " Otherwise" : ";");
      return kExitUsage;
    }
    return runLaunch(*options);
  };
  return cmd;
}

}  // namespace tally::commands
