// Placeholder until the launch command is written.
#include <cstdio>

#include "tools/commands/command.h"

namespace tally::commands {

Subcommand addLaunchCommand(CLI::App& parent) {
  Subcommand cmd;
  cmd.app = parent.add_subcommand("launch", "(not written yet)");
  cmd.run = [] {
    std::fprintf(stderr, "tally launch: not written yet\n");
    return 1;
  };
  return cmd;
}

}  // namespace tally::commands
