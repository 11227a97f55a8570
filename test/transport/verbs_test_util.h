// SPDX-License-Identifier: Apache-2.0
// Connected verbs pairs for tests, and whether this host can make them at all.
#pragma once

#include <gtest/gtest.h>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "test/transport/fake_sysfs.h"
#include "test/transport/verbs_fake.h"
#include "transport/network.h"
#include "transport/verbs/internal.h"
#include "transport/verbs/verbs.h"

namespace tally::transport::test {

// A connected pair over `network`'s first device (side channel on loopback). Both ends step until
// done or 20 s pass.
inline Status verbsPair(Network* network, const ConnectionOptions& conn_options,
                        std::unique_ptr<Connection>* client, std::unique_ptr<Connection>* server) {
  std::unique_ptr<Listener> listener;
  TALLY_RETURN_IF_ERROR(network->listenAt("127.0.0.1:0", &listener));
  std::unique_ptr<PendingConnection> pending;
  TALLY_RETURN_IF_ERROR(network->connectTo(listener->address(), conn_options, &pending));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!*client || !*server) {
    if (!*client) TALLY_RETURN_IF_ERROR(pending->step(client));
    if (!*server) TALLY_RETURN_IF_ERROR(listener->accept(server));
    if (std::chrono::steady_clock::now() > deadline) return Status::timeout("verbs pair in test");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return Status::ok();
}

// A network on a fresh software device (verbs_fake.h) configured by `config`, reached through
// `api` (a table of verbs_fake.h), side channel on loopback. Resets the fake's counters.
inline Status fakeVerbsNetwork(const FakeVerbsConfig& config, verbs::VerbsOptions options,
                               std::shared_ptr<Network>* out,
                               const verbs::VerbsApi* api = fakeVerbsApi()) {
  resetFakeVerbs(config);
  options.side_ifname = "lo";
  return verbs::createNetworkWith(api, options, out);
}

// A connected pair on a fresh software device (verbs_fake.h) with `link` (IBV_LINK_LAYER_*),
// allowing `max_requests` in flight per direction (0: the default). Resets the fake's counters.
inline Status verbsFakePair(uint8_t link, int max_requests, std::unique_ptr<Connection>* client,
                            std::unique_ptr<Connection>* server) {
  FakeVerbsConfig config;
  config.link_layer = link;
  verbs::VerbsOptions options;
  options.min_stripe = 64 * 1024;  // so messages from 128 KiB are cut over the data queue pairs
  if (max_requests > 0) options.max_requests = max_requests;
  std::shared_ptr<Network> network;
  TALLY_RETURN_IF_ERROR(fakeVerbsNetwork(config, options, &network));
  ConnectionOptions conn_options;
  conn_options.max_requests = max_requests;
  return verbsPair(network.get(), conn_options, client, server);
}

// A connected pair on a fresh software device with `config` and `options`, plus the network
// (for its properties). Use under ASSERT_NO_FATAL_FAILURE.
struct FakePair {
  std::shared_ptr<Network> network;
  std::unique_ptr<Connection> client;
  std::unique_ptr<Connection> server;
};

inline void makeFakePair(const FakeVerbsConfig& config, const verbs::VerbsOptions& options,
                         FakePair* pair) {
  ASSERT_TRUE(fakeVerbsNetwork(config, options, &pair->network).isOk());
  Status status = verbsPair(pair->network.get(), {}, &pair->client, &pair->server);
  ASSERT_TRUE(status.isOk()) << status.toString();
}

// Sends and waits (5 s at most) for the send to complete; use under ASSERT_NO_FATAL_FAILURE.
inline void sendAndWait(Connection* conn, const void* data, size_t size, int tag,
                        MemoryRegion* mr) {
  std::unique_ptr<Request> req;
  Status status = conn->isend(data, size, tag, mr, &req);
  ASSERT_TRUE(status.isOk()) << status.toString();
  ASSERT_NE(req, nullptr);
  status = req->wait(5000, nullptr);
  ASSERT_TRUE(status.isOk()) << status.toString();
}

// After a test on the software device: what a real fabric would refuse, or only make slow,
// never happened, and nothing leaked.
inline void expectFakeVerbsClean() {
  FakeVerbsStats stats = fakeVerbsStats();
  EXPECT_EQ(stats.sent_before_rtr, 0) << "a queue pair was used before its peer was ready";
  EXPECT_EQ(stats.rnr_waits, 0) << "a write or send found no receive posted";
  EXPECT_EQ(stats.bad_access, 0);
  EXPECT_EQ(stats.cq_overflows, 0);
  EXPECT_EQ(stats.bad_transitions, 0);
  EXPECT_EQ(stats.live_qps, 0);
  EXPECT_EQ(stats.live_cqs, 0);
  EXPECT_EQ(stats.live_mrs, 0);
  EXPECT_EQ(stats.live_channels, 0);
  EXPECT_EQ(stats.live_pds, 0);
  EXPECT_EQ(stats.live_contexts, 0);
}

}  // namespace tally::transport::test
