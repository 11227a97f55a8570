// SPDX-License-Identifier: Apache-2.0
// tally-reducer: serves CollNet all-reduce for any number of jobs until SIGINT or SIGTERM.
//
//   tally-reducer --listen HOST:PORT [--transport auto|tcp|ofi|verbs] [--threads N] [--window N]
//                 [--metrics HOST:PORT] [--token-file PATH] [--max-connections N]
//                 [--max-opening-connections N]
//                 [--max-memory BYTES] [--max-communicator-memory BYTES]
//                 [--zerocopy off|on|always] [--zerocopy-min-bytes BYTES] [--verbose]
//
// It listens only on --listen, over the transport --transport names (default TALLY_TRANSPORT,
// itself "auto": verbs, else a high-speed libfabric provider, else TCP; transport/network.h); the
// choice and why is logged at INFO. A transport that cannot be opened exits 1, or 2 when the
// reason is configuration (a bad name, a backend not built into this tally-reducer).
//
// With a job token (--token-file, else TALLY_JOB_TOKEN or TALLY_JOB_TOKEN_FILE from its
// environment) every connection must prove it before its Hello is read (docs/security.md); a bad
// token file exits 2.
//
// Prints one line on stdout once it accepts connections, "tally-reducer listening on HOST:PORT"
// with the real port, so scripts can start it on port 0. With --metrics (docs/metrics.md) a
// second line follows, "tally-reducer metrics on http://HOST:PORT/metrics", again with the real
// port. Exit status: 0 after a signal, 2 for bad arguments (a malformed --metrics address
// included), 1 when serving fails to start (the reducer's or the metrics address cannot be bound).
// Every failure to start, a bad command line included, is printed as one line on stderr,
// "tally-reducer: error: WHY", whatever the log level. `--version` prints "tally-reducer VERSION".
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/auth.h"
#include "common/cli_usage.h"
#include "common/log.h"
#include "common/params.h"
#include "common/sizes.h"
#include "common/version.h"
#include "reducer/server.h"
#include "reducer/metrics/metrics_server.h"
#include "transport/network.h"

namespace {

constexpr int kExitUsage = 2;

// A reason the reducer cannot start: an error, not a warning, and shown even when the log level
// hides warnings. Returns `code`, for `return fail(...)`.
int fail(int code, const std::string& why) {
  std::fprintf(stderr, "tally-reducer: error: %s\n", why.c_str());
  return code;
}

int failWith(const tally::Status& st, const std::string& what) {
  return fail(st.code() == tally::StatusCode::kInvalidUsage ? kExitUsage : 1,
              what + st.toString());
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tally;
  reducer::ServerOptions options;
  options.listen.clear();
  bool verbose = false;
  std::string metrics_address;
  std::string token_file;
  std::string transport_name;

  // Named, so that help and messages say "tally-reducer", not the path it was run by.
  CLI::App app{"Tally reduction server: sums CollNet all-reduce slices for the workers.",
               "tally-reducer"};
  app.set_version_flag("--version", std::string("tally-reducer ") + versionString());
  app.add_option("--listen", options.listen, "HOST:PORT to listen on (port 0 picks one)")
      ->required();
  app.add_option("--transport", transport_name,
                 "network to serve over: auto, tcp, ofi or verbs (default: TALLY_TRANSPORT, "
                 "else auto)")
      ->check(CLI::IsMember({"auto", "tcp", "ofi", "verbs"}));
  // One loop per core: each serves many connections and reduces and answers their slices itself.
  // The help says so in words: a number there would be the core count of whichever machine
  // printed it, and the man page is printed on the build machine.
  options.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 64u));
  app.add_option("--threads", options.threads,
                 "event-loop threads, each serving many connections (default: the number of "
                 "cores, at most 64)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--window", options.window, "slices buffered per worker connection")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--metrics", metrics_address,
                 "HOST:PORT to serve Prometheus metrics on, at /metrics (port 0 picks one)")
      ->check(CLI::Validator(
          [](std::string& value) {
            const Status valid = metrics::checkBindAddress(value);
            return valid.isOk() ? std::string() : valid.message();
          },
          "HOST:PORT"));
  app.add_option("--token-file", token_file,
                 "file holding the job token every worker must prove (overrides "
                 "TALLY_JOB_TOKEN and TALLY_JOB_TOKEN_FILE)");
  std::string max_memory = "64G";
  std::string max_communicator_memory = "16G";
  app.add_option("--max-connections", options.max_connections,
                 "worker connections that joined a communicator at once; a Hello past it is "
                 "refused")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-opening-connections", options.max_opening_connections,
                 "connections not joined yet (token not proven, no Hello); when full, a new "
                 "one evicts the oldest (0: max(16, max-connections / 4))")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  const auto bytes = CLI::Validator(
      [](std::string& value) {
        uint64_t v = 0;
        const Status valid = parseBytes(value, &v);
        return valid.isOk() ? std::string() : valid.message();
      },
      "BYTES");
  app.add_option("--max-memory", max_memory,
                 "slice memory all communicators may reserve together (64G, 512M, ...); a "
                 "communicator that would pass it is refused")
      ->check(bytes)
      ->capture_default_str();
  app.add_option("--max-communicator-memory", max_communicator_memory,
                 "slice memory one communicator may reserve: "
                 "(ranks + 1) x (window + 1) x slice bytes")
      ->check(bytes)
      ->capture_default_str();
  std::string zerocopy = "off";
  app.add_option("--zerocopy", zerocopy,
                 "send results with MSG_ZEROCOPY: off; on (a connection whose sends the kernel "
                 "copies anyway, such as loopback, goes back to copying); always")
      ->check(CLI::IsMember({"off", "on", "always"}))
      ->capture_default_str();
  std::string zerocopy_min = "64K";
  app.add_option("--zerocopy-min-bytes", zerocopy_min,
                 "with --zerocopy: writes smaller than this are copied")
      ->check(bytes)
      ->capture_default_str();
  app.add_flag("--verbose", verbose, "log connections and communicators (INFO)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line in Tally's words: the option, and what it takes (common/cli_usage.h).
    return fail(kExitUsage,
                cli::usageError(app, e, std::vector<std::string>(argv + 1, argv + argc)));
  }

  // A long-lived server: every line says when, for matching it with the workers' logs.
  log::setSink(&log::timestampedStderrSink, verbose ? log::Level::kInfo : log::Level::kWarn);

  // Socket settings come from the same TALLY_ variables the workers read.
  Params params;
  Status st = Params::load(EnvParamSource(), &params);
  if (st.isOk() && !token_file.empty()) {
    // --token-file takes the place of TALLY_JOB_TOKEN and TALLY_JOB_TOKEN_FILE: theirs are not
    // the values in use, so they are not checked.
    params.jobToken.clear();
    params.jobTokenFile.clear();
  }
  if (st.isOk()) st = params.validate();
  if (!st.isOk()) return fail(kExitUsage, st.message());
  params.logProvenance();
  if (!transport_name.empty()) params.transport = transport_name;
  transport::NetworkConfig network_config;
  st = transport::networkConfigFromParams(params, &network_config);
  if (!st.isOk()) return fail(kExitUsage, st.message());
  // The reducer listens where --listen says: TALLY_SOCKET_IFNAME describes the workers' hosts and
  // may name interfaces this host lacks, so TCP takes the default interface choice here.
  network_config.ifname_spec.clear();
  // The reader completes slices and posts their results, the writer reaps them: both may write
  // small ones to the socket themselves.
  network_config.tcp.inline_sends = true;
  options.timeouts = network_config.timeouts;
  options.join_timeout_ms = params.connectTimeout;
  (void)transport::parseZerocopyMode(zerocopy, &options.zerocopy);  // checked by IsMember
  (void)parseBytes(zerocopy_min, &options.zerocopy_min_bytes);
  (void)parseBytes(max_memory, &options.max_memory_bytes);  // checked by the validator
  (void)parseBytes(max_communicator_memory, &options.max_communicator_bytes);
  st = token_file.empty()
           ? auth::loadJobToken(params.jobToken, params.jobTokenFile, &options.job_token)
           : auth::loadJobToken("", token_file, &options.job_token);
  if (!st.isOk()) return fail(kExitUsage, st.message());
  if (options.job_token.empty()) {
    TALLY_INFO(log::kInit,
               "tally-reducer: no job token (--token-file, TALLY_JOB_TOKEN or "
               "TALLY_JOB_TOKEN_FILE): any worker that reaches %s is served",
               options.listen.c_str());
  }

  // Signals are taken by sigwait below: block them before any thread starts, so every thread
  // inherits the mask and none is interrupted.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A worker vanishing mid-send must be an error on that connection, not the end of the server.
  signal(SIGPIPE, SIG_IGN);

  // Before the reducer, which reports to it; destroyed after the reducer stopped. Started after the
  // signal mask, so its HTTP threads leave SIGINT and SIGTERM to sigwait too.
  std::unique_ptr<metrics::MetricsServer> metrics;
  if (!metrics_address.empty()) {
    st = metrics::MetricsServer::start(metrics_address, &metrics);
    if (!st.isOk()) return failWith(st, "");
    options.observer = metrics->observer();
  }

  std::string why;
  st = transport::openNetwork(network_config, &options.network, &why);
  if (!st.isOk()) return failWith(st, "cannot open the transport: ");
  TALLY_INFO(log::kInit, "tally-reducer: transport: %s", why.c_str());

  std::unique_ptr<reducer::ReducerServer> server;
  st = reducer::ReducerServer::start(options, &server);
  if (!st.isOk()) return failWith(st, "cannot serve on " + options.listen + ": ");
  std::printf("tally-reducer listening on %s\n", server->address().c_str());
  if (metrics) std::printf("tally-reducer metrics on %s\n", metrics->url().c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  TALLY_INFO(log::kInit, "tally-reducer: signal %d, stopping", sig);
  server->stop();
  return 0;
}
