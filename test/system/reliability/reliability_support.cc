// SPDX-License-Identifier: Apache-2.0
#include "test/system/reliability/reliability_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "test/support/scrape.h"
#include "tools/driver/reference.h"

namespace tally::reliability {

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

Status startReducer(const std::string& listen, Reducer* out) {
  Reducer r;
  r.metrics_port = freePort();
  if (r.metrics_port == 0) return Status::system("no free port for the metrics endpoint");
  driver::ReducerOptions options;
  options.listen = listen;
  options.extra_args = {"--threads", "1", "--metrics",
                        "127.0.0.1:" + std::to_string(r.metrics_port)};
  TALLY_RETURN_IF_ERROR(
      driver::ReducerProcess::launch(functional::reducerPath(), options, 20000, &r.process));
  *out = std::move(r);
  return Status::ok();
}

std::string reducerList(const std::vector<Reducer>& reducers) {
  std::string list;
  for (const Reducer& r : reducers) list += (list.empty() ? "" : ",") + r.process->address();
  return list;
}

std::optional<double> openCommunicators(const Reducer& r) {
  std::string body;
  if (!metrics::test::httpGet(r.metrics_port, "/metrics", &body).isOk()) return std::nullopt;
  return metrics::test::seriesValue(body, "tally_reducer_communicators");
}

std::optional<double> waitOpenCommunicators(const Reducer& r, double want, int64_t timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::optional<double> value;
  for (;;) {
    value = openCommunicators(r);
    if ((value && *value == want) || Clock::now() > deadline) return value;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void setFailureEnvironment(const std::string& reducer_list) {
  functional::setWorkerEnvironment(reducer_list);
  ::setenv("TALLY_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
}

Status checkedAllreduce(driver::CollComm* comm, size_t count, uint64_t seed) {
  const DataType type = DataType::kFloat32;
  const ReduceOp op = ReduceOp::kSum;
  const size_t bytes = count * dataTypeSize(type);
  std::vector<char> in(bytes), out(bytes), expected(bytes);
  driver::fillInput(type, op, comm->rank(), comm->nranks(), seed, count, in.data());
  driver::fillExpected(type, op, comm->nranks(), seed, count, expected.data());
  TALLY_RETURN_IF_ERROR(comm->allreduce(in.data(), out.data(), count, type, op));
  size_t first = 0;
  const size_t wrong = driver::countMismatches(type, out.data(), expected.data(), count, &first);
  if (wrong != 0) {
    return Status::internal(std::to_string(wrong) + " wrong elements, first " +
                            driver::describeElement(type, out.data(), expected.data(), first));
  }
  return Status::ok();
}

void timedAllreduce(driver::CollComm* comm, size_t count, Status* status, int64_t* ms) {
  std::vector<float> in(count, 1.0f), out(count);
  const auto start = Clock::now();
  *status = comm->allreduce(in.data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum);
  *ms = msSince(start);
}

}  // namespace tally::reliability
