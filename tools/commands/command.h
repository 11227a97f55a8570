// SPDX-License-Identifier: Apache-2.0
// The `tally` subcommands that live in tools/commands/ (launch, plan, doctor).
//
// Each add*Command registers its options on `parent` before parsing and returns the CLI11 app it
// added with the function that runs it; tally_main.cc calls `run` for the one that was chosen.
// `run` returns the process exit status; `usage_exit` is the status for a command line that does
// not parse (2, as usage errors do, unless the command documents another). tally_main.cc prints
// such an error as one line, "tally COMMAND: WHAT" (common/cli_usage.h), then calls
// `usage_error`, when set, with WHAT and the words given to the command, for a command that
// reports errors elsewhere too (`tally plan --json` puts them in its JSON).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace tally::commands {

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
  int usage_exit = 2;
  std::function<void(const std::string& message, const std::vector<std::string>& args)> usage_error;
};

// tally launch [--dry-run] -- CMD ARGS...   (launch.cc)
Subcommand addLaunchCommand(CLI::App& parent);
// tally plan [--spec FILE | flags] [--json]   (plan.cc)
Subcommand addPlanCommand(CLI::App& parent);
// tally doctor   (doctor.cc)
Subcommand addDoctorCommand(CLI::App& parent);

}  // namespace tally::commands
