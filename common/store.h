// SPDX-License-Identifier: Apache-2.0
// Store: a small key-value rendezvous used to exchange connect handles, results and barriers
// between the ranks of a job (tests, the demo, bootstrap). Rendezvous is kept apart from
// transport: a Store never opens a socket of Tally's transport.
//
// Semantics shared by every implementation
//   - Keys are non-empty strings; values are byte strings (possibly empty).
//   - set() overwrites; a reader sees either the old or the new value whole, never a mix.
//   - get() and wait() block until every key named exists or `timeout_ms` passes
//     (StatusCode::kTimeout naming the first missing key). timeout_ms < 0 waits forever.
//   - On failure the output parameters are left untouched.
//   - Every method is thread-safe. A FileStore may be shared by unrelated processes that name the
//     same directory; a MemoryStore lives in one process (a fork gets its own copy).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tally {

class Store {
 public:
  virtual ~Store() = default;

  virtual Status set(const std::string& key, std::string_view value) = 0;
  // Waits for `key`, then copies its value into *value.
  virtual Status get(const std::string& key, std::string* value, int64_t timeout_ms) = 0;
  // Waits until every key in `keys` exists.
  virtual Status wait(const std::vector<std::string>& keys, int64_t timeout_ms) = 0;
  // True when `key` exists now. Never blocks.
  virtual bool check(const std::string& key) = 0;
};

// A map guarded by a mutex, with a condition variable for waiters.
std::unique_ptr<Store> createMemoryStore();

// One file per key in `directory`, which must exist. Writes go to a temporary file in the same
// directory, then rename() over the final name, so readers never see a partial value. Waiters
// poll with short sleeps (1 ms growing to 10 ms) until their deadline.
Status createFileStore(const std::string& directory, std::unique_ptr<Store>* out);

// A view of `base` that prepends `prefix` + "/" to every key; `base` must outlive it.
std::unique_ptr<Store> createPrefixStore(Store* base, std::string prefix);

// Barrier over a store: rank sets "<name>/<rank>" and waits for all nranks of them.
// Each barrier in a job needs a distinct name.
Status storeBarrier(Store* store, const std::string& name, int rank, int nranks,
                    int64_t timeout_ms);

}  // namespace tally
