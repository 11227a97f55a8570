// SPDX-License-Identifier: Apache-2.0
#include "test/support/exec_workers.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace tally::functional {
namespace {

// The argument that makes the program a worker, before its name and rank.
constexpr char kWorkerFlag[] = "--tally-worker";
// Exit statuses of a worker that never ran its body.
constexpr int kBadCommandLine = 64;

std::map<std::string, WorkerBody>& registry() {
  // Built on first use: registrations run during static initialization, in any order.
  static std::map<std::string, WorkerBody> workers;
  return workers;
}

}  // namespace

WorkerParams& WorkerParams::set(const std::string& name, const std::string& value) {
  values_[name] = value;
  return *this;
}

WorkerParams& WorkerParams::set(const std::string& name, int64_t value) {
  return set(name, std::to_string(value));
}

std::string WorkerParams::get(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? "" : it->second;
}

int64_t WorkerParams::getInt(const std::string& name, int64_t otherwise) const {
  const std::string text = get(name);
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return text.empty() || ec != std::errc() || ptr != end ? otherwise : value;
}

std::vector<std::string> WorkerParams::toArgs() const {
  std::vector<std::string> args;
  for (const auto& [name, value] : values_) args.push_back(name + "=" + value);
  return args;
}

bool WorkerParams::fromArgs(const std::vector<std::string>& args, WorkerParams* out,
                            std::string* bad) {
  WorkerParams params;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      *bad = arg;
      return false;
    }
    params.set(arg.substr(0, eq), arg.substr(eq + 1));
  }
  *out = std::move(params);
  return true;
}

bool registerWorker(const std::string& name, WorkerBody body) {
  if (!registry().emplace(name, std::move(body)).second) {
    std::fprintf(stderr, "worker %s registered twice\n", name.c_str());
    std::abort();
  }
  return true;
}

Status runExecWorkers(const std::string& name, int nworkers, const WorkerParams& params,
                      int64_t timeout_ms, std::vector<driver::WorkerExit>* exits,
                      const driver::WorkerHooks& hooks) {
  const std::string self = driver::selfPath();
  if (self.empty()) return Status::system("cannot read /proc/self/exe to start workers");
  const std::vector<std::string> param_args = params.toArgs();
  return driver::runExecWorkers(
      nworkers,
      [&](int rank) {
        driver::WorkerProgram program;
        program.binary = self;
        program.args = {kWorkerFlag, name, std::to_string(rank)};
        program.args.insert(program.args.end(), param_args.begin(), param_args.end());
        return program;
      },
      timeout_ms, exits, hooks);
}

std::string runAllExec(const std::string& name, int nworkers, const WorkerParams& params,
                       int64_t timeout_ms) {
  std::vector<driver::WorkerExit> exits;
  Status s = runExecWorkers(name, nworkers, params, timeout_ms, &exits);
  if (!s.isOk()) return s.toString();
  std::string why;
  driver::allWorkersOk(exits, &why);
  return why;
}

void runWorkerIfAsked(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], kWorkerFlag) != 0) return;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s %s NAME RANK [name=value]...\n", argv[0], kWorkerFlag);
    std::exit(kBadCommandLine);
  }
  const std::string name = argv[2];
  int rank = -1;
  const char* rank_end = argv[3] + std::strlen(argv[3]);
  auto [ptr, ec] = std::from_chars(argv[3], rank_end, rank);
  WorkerParams params;
  std::string bad;
  if (ec != std::errc() || ptr != rank_end || rank < 0 ||
      !WorkerParams::fromArgs(std::vector<std::string>(argv + 4, argv + argc), &params, &bad)) {
    std::fprintf(stderr, "worker %s: bad rank '%s' or parameter '%s'\n", name.c_str(), argv[3],
                 bad.c_str());
    std::exit(kBadCommandLine);
  }
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::fprintf(stderr, "worker %s: no such worker in %s\n", name.c_str(), argv[0]);
    std::exit(kBadCommandLine);
  }
  const WorkerBody& body = it->second;
  driver::runChildBody([&](int r) { return body(r, params); }, rank, "worker");
}

}  // namespace tally::functional
