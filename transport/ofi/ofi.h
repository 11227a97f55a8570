// SPDX-License-Identifier: Apache-2.0
// The libfabric (ofi) backend of transport.h and network.h.
//
// One Device per libfabric domain of the chosen provider (TALLY's provider option, else
// FI_PROVIDER, which libfabric honours itself, else libfabric's first choice). Every Connection
// is its own reliable-datagram (FI_EP_RDM) endpoint with its own completion queue and a
// one-entry address vector, made in the device's shared domain, and is set up over a TCP side
// channel (transport/side_channel.h) that stays open to watch the peer. transport/ofi/wire.h
// says what goes on the fabric; docs/transports.md how to run it.
//
// libfabric.so.1 is loaded at run time (transport/ofi/loader.h): a host without it gets a
// kInvalidUsage Status from createNetwork, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "transport/network.h"

namespace tally::transport::ofi {

struct OfiOptions {
  // libfabric provider name, e.g. "efa" or "tcp" (matches "tcp;ofi_rxm"). Empty: FI_PROVIDER
  // when set, else the first provider libfabric offers for reliable tagged messaging.
  std::string provider;
  // Comma list of domain names to make devices for (exact names, e.g. "rdmap0s6-rdm,lo"). Empty:
  // every domain of the provider except loopback ("lo"), or loopback alone when it is the only
  // one.
  std::string domains;
  // Numeric address Device::listen puts its side channel on when the domain's own address is
  // not an IP address (efa, verbs): empty picks the first interface tcp::findInterfaces offers.
  std::string side_address;
  // connect_ms bounds connect and setup; io_ms: an in-flight message that makes no progress for
  // this long fails the connection with kTimeout (idle time between messages is fine).
  Timeouts timeouts;
  int max_requests = 256;  // default in-flight requests per direction
  // Largest payload chunk; 0: the provider's max_msg_size, capped at 1 GiB. Tests lower it to
  // cover message splitting.
  uint64_t max_chunk_bytes = 0;
  // Tests: register every unregistered buffer, as providers asking for FI_MR_LOCAL require,
  // even when the provider does not ask.
  bool force_local_mr = false;
  // Tests: ask for RMA reads (FI_RMA) even from a provider without FI_HMEM, so that
  // Connection::iflush's read-back runs on loopback.
  bool read_back = false;
  // Tests: carry no payload inline in control messages, as a provider with FI_HMEM does.
  bool no_inline = false;
  // Tests: over ofi_rxm, chunks above its eager size too (they then go by rxm's rendezvous, which
  // completes a send only once the peer takes it), to cover a send the peer takes none of.
  bool rxm_rendezvous = false;
};

// Loads libfabric, picks the provider and opens a domain per device. Logs (INFO) the provider
// picked and the devices. Errors: kInvalidUsage for a missing library, an unknown provider or
// no matching domain; kInternal for a libfabric too old or failing in a way that is a bug.
Status createNetwork(const OfiOptions& options, std::shared_ptr<Network>* out);

}  // namespace tally::transport::ofi
