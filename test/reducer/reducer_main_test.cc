// tally-reducer as a process: the ready line, SIGTERM, bad arguments.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace {

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
};

Child spawn(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(TALLY_REDUCER_BIN));
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  c.out = fdopen(fds[0], "r");
  return c;
}

// Waits up to 10 s for the child to exit; kills it after that. Returns the exit status or -1.
int reap(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

TEST(ReducerMainTest, PrintsReadyLineAndStopsOnSigterm) {
  Child c = spawn({"--listen", "127.0.0.1:0", "--threads", "2"});
  ASSERT_GT(c.pid, 0);
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof(line), c.out), nullptr);
  std::string s(line);
  EXPECT_EQ(s.rfind("tally-reducer listening on 127.0.0.1:", 0), 0u) << s;
  EXPECT_NE(s.substr(s.rfind(':') + 1), "0\n") << s;
  kill(c.pid, SIGTERM);
  EXPECT_EQ(reap(c.pid), 0);
  fclose(c.out);
}

TEST(ReducerMainTest, BadArgumentsExitTwo) {
  for (auto args : std::vector<std::vector<std::string>>{
           {}, {"--listen", "127.0.0.1:0", "--threads", "0"}, {"--bogus"},
           {"--listen", "127.0.0.1:0", "--window", "x"}}) {
    Child c = spawn(args);
    ASSERT_GT(c.pid, 0);
    EXPECT_EQ(reap(c.pid), 2);
    fclose(c.out);
  }
}

}  // namespace
