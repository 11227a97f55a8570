// SPDX-License-Identifier: Apache-2.0
// What the keeper (keeper.h) may ask of the posting side of a CollClient: the narrow interface
// between membership (which reducers serve the communicator, agreed with the other ranks) and
// posting (numbering calls, cutting them into slices, queueing them on links). The keeper holds
// new calls while a change is agreed, takes a lost link's slices and hands them back to be
// placed again, and installs a joined link; posting never calls the keeper but through
// LinkOwner (link_owner.h). Implemented by CollClientImpl; not a public interface.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "protocol/wire.h"
#include "worker_client/ledger.h"
#include "worker_client/link.h"

namespace tally::worker_client {

// What placing a lost reducer's slices again did (Posting::applyLoss).
struct LossApplied {
  std::string cannot;   // why this rank cannot go on ("" when it can)
  size_t again = 0;     // slices placed again
  size_t at_once = 0;   // of them, sent at once rather than at the boundary
  uint32_t live = 0;    // slots live after the change
};

class Posting {
 public:
  // Holds new calls (a post then returns a NULL request) until the change is applied or
  // released; returns the number of the next call, which no rank has posted yet.
  virtual uint64_t holdCalls() = 0;
  // The number of the next call, without holding.
  virtual uint64_t nextCall() = 0;
  // Lets calls be posted again (a join that did not happen).
  virtual void releaseCalls() = 0;
  // Applies decision `c` (a loss) to the placement and places `orphans` (the lost link's
  // books) again: committed ones complete, the others are sent at once or parked for the
  // boundary. Releases the hold.
  virtual LossApplied applyLoss(const protocol::wire::Control& c,
                                std::vector<LedgerEntry> orphans) = 0;
  // Applies decision `c` (a join): `link` (started) serves its slot from the boundary on; the
  // slot's old link is retired. Releases the hold; returns the slots live after it.
  virtual uint32_t installLink(const protocol::wire::Control& c, std::shared_ptr<Link> link) = 0;
  // Whether a slot is served in the latest epoch. Only the keeper changes that (applyLoss,
  // installLink), so it may ask on its own thread without a lock.
  virtual bool live(uint32_t slot) const = 0;
  // Lets the placement forget the changes no live call depends on, once there are a few.
  virtual void compactPlacement() = 0;

  // The link serving each slot now (or the ended one of a lost slot), into *out.
  virtual void snapshotLinks(std::vector<std::shared_ptr<Link>>* out) = 0;
  virtual std::shared_ptr<Link> linkAt(uint32_t slot) = 0;
  // A link to a reducer that joins: over `conn`, or over the raw socket `fd` when it is valid.
  virtual std::shared_ptr<Link> newLink(uint32_t slot, const std::string& address,
                                        std::unique_ptr<transport::Connection> conn, Fd fd,
                                        int window) = 0;
  // Starts a joined link's I/O (its threads, or its place in the progress thread).
  virtual Status startLink(const std::shared_ptr<Link>& link) = 0;
  // Keeps a retired link (its books taken, or never used) until nothing it shared can reach
  // it; dropRetired frees the ones that are unreachable now.
  virtual void keepRetired(std::shared_ptr<Link> link) = 0;
  virtual void dropRetired() = 0;

  // The communicator failed: `st` becomes its sticky error.
  virtual void failCommunicator(const Status& st) = 0;
  // close() or abort() is under way: the keeper handles no more events.
  virtual bool closing() const = 0;

 protected:
  ~Posting() = default;
};

}  // namespace tally::worker_client
