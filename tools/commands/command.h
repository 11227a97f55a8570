// The `tally` subcommands that live in tools/commands/ (launch, plan, doctor).
//
// Each add*Command registers its options on `parent` before parsing and returns the CLI11 app it
// added with the function that runs it; tally_main.cc calls `run` for the one that was chosen.
// `run` returns the process exit status; `usage_exit` is the status for a command line that does
// not parse (2, as usage errors do, unless the command documents another).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace tally::commands {

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
  int usage_exit = 2;
};

// tally launch [--dry-run] -- CMD ARGS...   (launch.cc)
Subcommand addLaunchCommand(CLI::App& parent);
// tally plan [--spec FILE | flags] [--json]   (plan.cc)
Subcommand addPlanCommand(CLI::App& parent);
// tally doctor   (doctor.cc)
Subcommand addDoctorCommand(CLI::App& parent);

}  // namespace tally::commands
