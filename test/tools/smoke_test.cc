// The `tally` binary starts and lists its subcommands.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

std::string runAndCapture(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  ::pclose(pipe);
  return out;
}

TEST(TallyCommand, HelpListsEverySubcommand) {
  const std::string help = runAndCapture(std::string(TALLY_BIN) + " --help 2>&1");
  for (const char* name : {"demo", "env", "launch", "plan", "doctor"}) {
    EXPECT_NE(help.find(name), std::string::npos) << name << " missing from:\n" << help;
  }
}

}  // namespace
