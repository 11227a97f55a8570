// Placeholder until the doctor command is written.
#include <cstdio>

#include "tools/commands/command.h"

namespace tally::commands {

Subcommand addDoctorCommand(CLI::App& parent) {
  Subcommand cmd;
  cmd.app = parent.add_subcommand("doctor", "(not written yet)");
  cmd.run = [] {
    std::fprintf(stderr, "tally doctor: not written yet\n");
    return 1;
  };
  return cmd;
}

}  // namespace tally::commands
