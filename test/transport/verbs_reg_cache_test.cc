// SPDX-License-Identifier: Apache-2.0
// The registration cache over a fake registrar that records every call.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "transport/verbs/reg_cache.h"

namespace tally::transport::verbs {
namespace {

// Hands out increasing keys and remembers which ranges are registered now. Addresses are made up:
// the cache never touches the memory.
struct FakeRegistrar {
  struct Range {
    uint64_t addr;
    uint64_t length;
  };
  std::map<uint32_t, Range> live;  // by lkey
  std::vector<Range> registered;   // every register call, in order
  int deregistrations = 0;
  uint32_t next_key = 100;
  uint64_t fail_above = 0;  // registrations longer than this fail (0: never)

  std::shared_ptr<RegistrationCache> cache(size_t entries, uint64_t bytes) {
    RegCacheLimits limits;
    limits.max_unpinned_entries = entries;
    limits.max_unpinned_bytes = bytes;
    return RegistrationCache::create(
        [this](uint64_t addr, uint64_t length, MemoryType, Registered* out) {
          registered.push_back({addr, length});
          if (fail_above != 0 && length > fail_above) {
            return Status::system("fake registration of " + std::to_string(length) + " failed");
          }
          out->lkey = next_key++;
          out->rkey = out->lkey + 1000;
          live[out->lkey] = {addr, length};
          return Status::ok();
        },
        [this](const Registered& reg) {
          ++deregistrations;
          EXPECT_EQ(live.erase(reg.lkey), 1u) << "deregistered twice or never registered";
        },
        limits);
  }
};

const void* at(uint64_t addr) { return reinterpret_cast<const void*>(addr); }

constexpr uint64_t kPage = 4096;
constexpr uint64_t kBig = uint64_t{1} << 40;

TEST(VerbsRegCacheTest, ContainedRangeHits) {
  FakeRegistrar fake;
  auto cache = fake.cache(16, kBig);
  RegistrationCache::Pin a;
  ASSERT_TRUE(cache->acquire(at(0x10010), 3 * kPage, MemoryType::kHost, &a).isOk());
  ASSERT_EQ(fake.registered.size(), 1u);
  // Page-aligned outwards: 0x10000 .. 0x14000.
  EXPECT_EQ(fake.registered[0].addr, 0x10000u);
  EXPECT_EQ(fake.registered[0].length, 4 * kPage);
  EXPECT_EQ(a.base(), 0x10000u);
  EXPECT_EQ(a.length(), 4 * kPage);
  EXPECT_EQ(a.lkey(), 100u);
  EXPECT_EQ(a.rkey(), 1100u);

  RegistrationCache::Pin b;
  ASSERT_TRUE(cache->acquire(at(0x12000), 100, MemoryType::kHost, &b).isOk());
  EXPECT_EQ(fake.registered.size(), 1u) << "a contained range registered again";
  EXPECT_EQ(b.lkey(), a.lkey());
  EXPECT_EQ(cache->stats().hits, 1u);
  // Another memory type never shares an entry.
  RegistrationCache::Pin c;
  ASSERT_TRUE(cache->acquire(at(0x12010), 100, MemoryType::kCuda, &c).isOk());
  ASSERT_EQ(fake.registered.size(), 2u);
  EXPECT_NE(c.lkey(), a.lkey());
  // Device memory is registered exactly: the pages around it need not be mapped.
  EXPECT_EQ(fake.registered[1].addr, 0x12010u);
  EXPECT_EQ(fake.registered[1].length, 100u);
}

TEST(VerbsRegCacheTest, OverlappingAndAdjacentUnpinnedEntriesMerge) {
  FakeRegistrar fake;
  auto cache = fake.cache(16, kBig);
  {
    RegistrationCache::Pin a;
    ASSERT_TRUE(cache->acquire(at(0x10000), kPage, MemoryType::kHost, &a).isOk());
    RegistrationCache::Pin b;
    ASSERT_TRUE(cache->acquire(at(0x12000), kPage, MemoryType::kHost, &b).isOk());
  }
  EXPECT_EQ(fake.live.size(), 2u) << "unpinned entries are kept within the bounds";
  // Adjacent to the first and overlapping the second: one registration over all three.
  RegistrationCache::Pin c;
  ASSERT_TRUE(cache->acquire(at(0x11000), 2 * kPage, MemoryType::kHost, &c).isOk());
  ASSERT_EQ(fake.registered.size(), 3u);
  EXPECT_EQ(fake.registered[2].addr, 0x10000u);
  EXPECT_EQ(fake.registered[2].length, 3 * kPage);
  EXPECT_EQ(fake.deregistrations, 2);
  EXPECT_EQ(fake.live.size(), 1u);
  EXPECT_EQ(cache->stats().entries, 1u);
}

TEST(VerbsRegCacheTest, PinnedEntriesAreNotMergedAway) {
  FakeRegistrar fake;
  auto cache = fake.cache(16, kBig);
  RegistrationCache::Pin a;
  ASSERT_TRUE(cache->acquire(at(0x10000), kPage, MemoryType::kHost, &a).isOk());
  RegistrationCache::Pin b;
  ASSERT_TRUE(cache->acquire(at(0x10800), kPage, MemoryType::kHost, &b).isOk());
  ASSERT_EQ(fake.registered.size(), 2u);
  EXPECT_EQ(fake.registered[1].addr, 0x10000u);  // its own pages only
  EXPECT_EQ(fake.registered[1].length, 2 * kPage);
  EXPECT_EQ(fake.deregistrations, 0);
  EXPECT_NE(a.lkey(), b.lkey());
  EXPECT_EQ(fake.live.count(a.lkey()), 1u);
}

TEST(VerbsRegCacheTest, FailedMergeFallsBackToOwnPages) {
  FakeRegistrar fake;
  auto cache = fake.cache(16, kBig);
  {
    RegistrationCache::Pin a;
    ASSERT_TRUE(cache->acquire(at(0x10000), 8 * kPage, MemoryType::kHost, &a).isOk());
  }
  fake.fail_above = 4 * kPage;  // the union (9 pages) fails, the request's own page works
  RegistrationCache::Pin b;
  ASSERT_TRUE(cache->acquire(at(0x18000), kPage, MemoryType::kHost, &b).isOk());
  ASSERT_EQ(fake.registered.size(), 3u);
  EXPECT_EQ(fake.registered[1].length, 9 * kPage);
  EXPECT_EQ(fake.registered[2].addr, 0x18000u);
  EXPECT_EQ(fake.registered[2].length, kPage);
  EXPECT_EQ(fake.deregistrations, 0) << "the unmerged neighbour stays";
  // A failure with nothing to fall back on is returned as is.
  RegistrationCache::Pin c;
  Status status = cache->acquire(at(0x40000), 16 * kPage, MemoryType::kHost, &c);
  EXPECT_EQ(status.code(), StatusCode::kSystem);
  EXPECT_NE(status.message().find("fake registration of 65536 failed"), std::string::npos);
  EXPECT_FALSE(c);
}

TEST(VerbsRegCacheTest, ZeroBoundsDeregisterAtLastRelease) {
  FakeRegistrar fake;
  auto cache = fake.cache(0, 0);
  RegistrationCache::Pin a;
  ASSERT_TRUE(cache->acquire(at(0x10000), kPage, MemoryType::kHost, &a).isOk());
  RegistrationCache::Pin b;
  ASSERT_TRUE(cache->acquire(at(0x10000), 10, MemoryType::kHost, &b).isOk());
  EXPECT_EQ(fake.registered.size(), 1u);
  a.reset();
  EXPECT_EQ(fake.deregistrations, 0) << "released while another pin holds it";
  b.reset();
  EXPECT_EQ(fake.deregistrations, 1);
  EXPECT_TRUE(fake.live.empty());
}

TEST(VerbsRegCacheTest, LruEvictionByEntriesAndBytes) {
  FakeRegistrar fake;
  auto cache = fake.cache(2, 3 * kPage);
  auto touch = [&](uint64_t addr, uint64_t pages) {
    RegistrationCache::Pin pin;
    EXPECT_TRUE(cache->acquire(at(addr), pages * kPage, MemoryType::kHost, &pin).isOk());
    return pin.lkey();
  };
  uint32_t first = touch(0x100000, 1);
  uint32_t second = touch(0x200000, 1);
  EXPECT_EQ(fake.live.size(), 2u);
  EXPECT_EQ(touch(0x100000, 1), first);  // a hit makes the first most recently used
  touch(0x300000, 1);                    // three unpinned: the least recently used goes
  EXPECT_EQ(fake.live.count(second), 0u);
  EXPECT_EQ(fake.live.count(first), 1u);
  EXPECT_EQ(fake.live.size(), 2u);
  // Bytes: a 3-page entry plus anything else is over 3 pages.
  uint32_t large = touch(0x400000, 3);
  EXPECT_EQ(fake.live.size(), 1u);
  EXPECT_EQ(fake.live.count(large), 1u);
  RegCacheStats stats = cache->stats();
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.unpinned_bytes, 3 * kPage);
  EXPECT_EQ(stats.registrations, 4u);
  EXPECT_EQ(stats.deregistrations, 3u);
}

TEST(VerbsRegCacheTest, PinnedEntriesSurviveEviction) {
  FakeRegistrar fake;
  auto cache = fake.cache(0, 0);
  std::vector<RegistrationCache::Pin> pins(5);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(cache->acquire(at(0x100000 * (i + 1)), kPage, MemoryType::kHost, &pins[i]).isOk());
  }
  EXPECT_EQ(fake.live.size(), 5u);
  EXPECT_EQ(cache->stats().pinned_entries, 5u);
  pins[2].reset();
  EXPECT_EQ(fake.live.size(), 4u);
  for (int i : {0, 1, 3, 4}) EXPECT_EQ(fake.live.count(pins[i].lkey()), 1u);
}

TEST(VerbsRegCacheTest, Invalidation) {
  FakeRegistrar fake;
  auto cache = fake.cache(16, kBig);
  RegistrationCache::Pin held;
  ASSERT_TRUE(cache->acquire(at(0x10000), kPage, MemoryType::kHost, &held).isOk());
  {
    RegistrationCache::Pin idle;
    ASSERT_TRUE(cache->acquire(at(0x20000), kPage, MemoryType::kHost, &idle).isOk());
  }
  {
    RegistrationCache::Pin far;
    ASSERT_TRUE(cache->acquire(at(0x90000), kPage, MemoryType::kHost, &far).isOk());
  }
  cache->invalidate(at(0x10800), 0x10000);  // overlaps the first two, not the third
  EXPECT_EQ(fake.deregistrations, 1) << "the unpinned overlapping entry goes at once";
  EXPECT_EQ(fake.live.count(held.lkey()), 1u) << "a pinned entry stays until released";
  // The invalidated entry is not handed out again, even while still pinned.
  RegistrationCache::Pin again;
  ASSERT_TRUE(cache->acquire(at(0x10000), 8, MemoryType::kHost, &again).isOk());
  EXPECT_NE(again.lkey(), held.lkey());
  uint32_t stale = held.lkey();
  held.reset();
  EXPECT_EQ(fake.live.count(stale), 0u);
  EXPECT_EQ(fake.deregistrations, 2);
  // The far one was untouched and still hits.
  RegistrationCache::Pin far;
  size_t before = fake.registered.size();
  ASSERT_TRUE(cache->acquire(at(0x90000), 8, MemoryType::kHost, &far).isOk());
  EXPECT_EQ(fake.registered.size(), before);
}

TEST(VerbsRegCacheTest, PinsKeepTheCacheAndDestroyDeregistersTheRest) {
  FakeRegistrar fake;
  RegistrationCache::Pin pin;
  {
    auto cache = fake.cache(16, kBig);
    ASSERT_TRUE(cache->acquire(at(0x10000), kPage, MemoryType::kHost, &pin).isOk());
    RegistrationCache::Pin other;
    ASSERT_TRUE(cache->acquire(at(0x50000), kPage, MemoryType::kHost, &other).isOk());
  }
  EXPECT_EQ(fake.deregistrations, 0) << "the pin keeps the cache and its entries";
  RegistrationCache::Pin moved = std::move(pin);
  EXPECT_FALSE(pin);
  EXPECT_TRUE(moved);
  moved.reset();  // last reference: the cache goes, deregistering the rest
  EXPECT_EQ(fake.deregistrations, 2);
  EXPECT_TRUE(fake.live.empty());
}

}  // namespace
}  // namespace tally::transport::verbs
