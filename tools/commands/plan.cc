// Placeholder until the plan command is written.
#include <cstdio>

#include "tools/commands/command.h"

namespace tally::commands {

Subcommand addPlanCommand(CLI::App& parent) {
  Subcommand cmd;
  cmd.app = parent.add_subcommand("plan", "(not written yet)");
  cmd.run = [] {
    std::fprintf(stderr, "tally plan: not written yet\n");
    return 1;
  };
  return cmd;
}

}  // namespace tally::commands
