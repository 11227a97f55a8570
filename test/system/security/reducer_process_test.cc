// SPDX-License-Identifier: Apache-2.0
// tally-reducer as a process: it listens only where --listen says, and takes the job token from
// --token-file or its environment.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test/support/harness.h"
#include "test/support/reducer_child.h"

namespace tally::security_test {
namespace {

const std::string kToken = "process-test-job-token-7c1e4b90aa";

struct Reducer {
  pid_t pid = -1;
  std::string address;  // from the ready line; empty when it did not start
  int exit_code = -1;   // when it exited before the ready line
};

// Starts tally-reducer with `args` (and `env` added to its environment); waits up to 10 s for
// its ready line.
Reducer spawn(const std::vector<std::string>& args,
              const std::vector<std::pair<std::string, std::string>>& env = {}) {
  reducer::test::ReducerChild c = reducer::test::spawnReducer(args, env);
  if (c.pid <= 0 || c.out == nullptr) return {};
  Reducer r;
  r.pid = c.pid;
  char line[256] = {};
  // fgets returns at EOF when the reducer exits early; the test's own timeout bounds a hang.
  if (fgets(line, sizeof(line), c.out) != nullptr) {
    std::string s(line);
    const std::string prefix = "tally-reducer listening on ";
    if (s.rfind(prefix, 0) == 0) r.address = s.substr(prefix.size(), s.size() - prefix.size() - 1);
  }
  fclose(c.out);
  if (r.address.empty()) {
    r.exit_code = reducer::test::reapReducer(r.pid);
    r.pid = -1;
  }
  return r;
}

void stop(Reducer* r) {
  if (r->pid <= 0) return;
  kill(r->pid, SIGTERM);
  (void)reducer::test::reapReducer(r->pid);
}

// "local_address:port" (hex, as /proc/net/tcp* writes it) of every listening TCP socket `pid`
// holds.
std::vector<std::string> listeningSockets(pid_t pid) {
  std::set<std::string> inodes;
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  if (DIR* d = opendir(fd_dir.c_str())) {
    while (dirent* e = readdir(d)) {
      char target[256] = {};
      const std::string link = fd_dir + "/" + e->d_name;
      ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
      std::string t(target, n > 0 ? static_cast<size_t>(n) : 0);
      if (t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
    }
    closedir(d);
  }
  std::vector<std::string> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      fields >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >>
          inode;
      if (state == "0A" && inodes.count(inode)) out.push_back(local);
    }
  }
  return out;
}

TEST(ReducerProcessTest, ListensOnlyWhereTold) {
  Reducer r = spawn({"--listen", "127.0.0.1:0", "--threads", "1"});
  ASSERT_FALSE(r.address.empty()) << "exit " << r.exit_code;
  const int port = std::stoi(r.address.substr(r.address.rfind(':') + 1));
  char want[32];
  std::snprintf(want, sizeof(want), "0100007F:%04X", port);  // 127.0.0.1, little-endian hex
  const std::vector<std::string> sockets = listeningSockets(r.pid);
  stop(&r);
  ASSERT_EQ(sockets.size(), 1u) << "tally-reducer listens on more than --listen";
  EXPECT_EQ(sockets[0], want);
}

class TokenProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char path[] = "/tmp/tally-token-XXXXXX";
    int fd = mkstemp(path);  // mode 0600
    ASSERT_GE(fd, 0);
    const std::string text = kToken + "\n";
    ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
    path_ = path;
  }
  void TearDown() override { unlink(path_.c_str()); }

  // Two ranks against `reducer` with `token`: their connect statuses, and the sums checked
  // when they joined.
  std::vector<Status> join(const std::string& reducer, const std::string& token,
                           const std::string& token_file = "") {
    worker_client::CollOptions o;
    o.reducers = {reducer};
    o.timeouts.connect_ms = 5000;
    o.job_token = token;
    o.job_token_file = token_file;
    std::vector<std::unique_ptr<worker_client::CollClient>> clients;
    auto st = reducer::test::connectAll(std::vector<worker_client::CollOptions>(2, o), &clients);
    if (!st[0].isOk() || !st[1].isOk()) return st;
    std::vector<float> a(50000, 1.5f), b(50000, 2.0f), ra(50000), rb(50000);
    worker_client::CollRequest qa, qb;
    EXPECT_TRUE(reducer::test::post(clients[0].get(), a.data(), ra.data(), a.size(),
                                    DataType::kFloat32, ReduceOp::kSum, &qa)
                    .isOk());
    EXPECT_TRUE(reducer::test::post(clients[1].get(), b.data(), rb.data(), b.size(),
                                    DataType::kFloat32, ReduceOp::kSum, &qb)
                    .isOk());
    st[0] = reducer::test::waitRequest(&qa, nullptr);
    st[1] = reducer::test::waitRequest(&qb, nullptr);
    for (size_t i = 0; i < ra.size() && st[0].isOk(); ++i) EXPECT_EQ(ra[i], 3.5f) << i;
    EXPECT_EQ(ra, rb);
    return st;
  }

  std::string path_;
};

TEST_F(TokenProcessTest, TokenFileOption) {
  Reducer r = spawn({"--listen", "127.0.0.1:0", "--token-file", path_});
  ASSERT_FALSE(r.address.empty()) << "exit " << r.exit_code;
  for (const Status& s : join(r.address, "", path_)) EXPECT_TRUE(s.isOk()) << s.toString();
  for (const Status& s : join(r.address, "a-different-token-value-0000")) {
    EXPECT_NE(s.message().find("authentication failed"), std::string::npos) << s.toString();
  }
  for (const Status& s : join(r.address, "")) {
    EXPECT_NE(s.message().find("authentication failed"), std::string::npos) << s.toString();
  }
  stop(&r);
}

TEST_F(TokenProcessTest, TokenFromEnvironment) {
  Reducer r = spawn({"--listen", "127.0.0.1:0"}, {{"TALLY_JOB_TOKEN", kToken}});
  ASSERT_FALSE(r.address.empty()) << "exit " << r.exit_code;
  for (const Status& s : join(r.address, kToken)) EXPECT_TRUE(s.isOk()) << s.toString();
  for (const Status& s : join(r.address, "")) EXPECT_FALSE(s.isOk());
  stop(&r);
  Reducer f = spawn({"--listen", "127.0.0.1:0"}, {{"TALLY_JOB_TOKEN_FILE", path_}});
  ASSERT_FALSE(f.address.empty()) << "exit " << f.exit_code;
  for (const Status& s : join(f.address, kToken)) EXPECT_TRUE(s.isOk()) << s.toString();
  stop(&f);
}

TEST_F(TokenProcessTest, BadTokenFileExitsTwo) {
  EXPECT_EQ(spawn({"--listen", "127.0.0.1:0", "--token-file", path_ + ".missing"}).exit_code, 2);
  EXPECT_EQ(spawn({"--listen", "127.0.0.1:0"},
                  {{"TALLY_JOB_TOKEN", kToken}, {"TALLY_JOB_TOKEN_FILE", path_}})
                .exit_code,
            2);
}

}  // namespace
}  // namespace tally::security_test
