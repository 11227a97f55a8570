// SPDX-License-Identifier: Apache-2.0
// The software device's memory regions: ibv_reg_mr, ibv_reg_dmabuf_mr (a mappable fd stands in
// for a GPU's dma-buf) and the key, bound and access checks every transfer makes (verbs_fake.h).
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "test/transport/verbs_fake_internal.h"

namespace tally::transport::test::fake {
namespace {

// Remote rights need local write, as on real devices.
bool validAccess(int access) {
  const int needs_local = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
  return (access & needs_local) == 0 || (access & IBV_ACCESS_LOCAL_WRITE) != 0;
}

ibv_mr* addLocked(ibv_pd* pd, FakeMr* mr, size_t length, int access) {
  mr->base.context = pd->context;
  mr->base.pd = pd;
  mr->base.length = length;
  mr->base.lkey = g_next_key;
  // A key without any remote right is never found by a remote check.
  const int remote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  mr->base.rkey = (access & remote) != 0 ? g_next_key + 1 : 0;
  mr->access = access;
  g_next_key += 2;
  g_mrs[mr->base.lkey] = mr;
  ++g_stats.live_mrs;
  return &mr->base;
}

}  // namespace

ibv_mr* regMr(ibv_pd* pd, void* addr, size_t length, int access) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (addr == nullptr || length == 0 || !validAccess(access)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* mr = new FakeMr;
  mr->base.addr = addr;
  mr->iova = reinterpret_cast<uintptr_t>(addr);
  mr->host = static_cast<uint8_t*>(addr);
  return addLocked(pd, mr, length, access);
}

ibv_mr* regDmaBufMr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_config.dmabuf_errno != 0) {
    errno = g_config.dmabuf_errno;
    return nullptr;
  }
  if (fd < 0) {
    errno = EBADF;
    return nullptr;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) return nullptr;  // errno from fstat
  if (length == 0 || !validAccess(access) || offset + length > static_cast<uint64_t>(st.st_size)) {
    errno = EINVAL;  // a dma-buf is as large as its allocation: no range past it
    return nullptr;
  }
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t skew = offset % page;
  void* map = mmap(nullptr, length + skew, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   static_cast<off_t>(offset - skew));
  if (map == MAP_FAILED) return nullptr;  // errno from mmap
  auto* mr = new FakeMr;
  mr->base.addr = reinterpret_cast<void*>(static_cast<uintptr_t>(iova));
  mr->iova = iova;
  mr->host = static_cast<uint8_t*>(map) + skew;
  mr->map = map;
  mr->map_length = length + skew;
  g_dmabuf_regs.push_back({fd, offset, length, iova, access});
  return addLocked(pd, mr, length, access);
}

int deregMr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto* fake = reinterpret_cast<FakeMr*>(mr);
  g_mrs.erase(mr->lkey);
  if (fake->map != nullptr) munmap(fake->map, fake->map_length);
  delete fake;
  --g_stats.live_mrs;
  return 0;
}

uint8_t* checkLocked(uint32_t key, bool remote, uint64_t addr, uint64_t length, int access) {
  auto it = g_mrs.find(remote ? key - 1 : key);
  if (it == g_mrs.end() || (remote && it->second->base.rkey != key)) return nullptr;
  const FakeMr* mr = it->second;
  if ((mr->access & access) != access) return nullptr;
  if (addr < mr->iova || addr + length > mr->iova + mr->base.length) return nullptr;
  return mr->host + (addr - mr->iova);
}

}  // namespace tally::transport::test::fake

namespace tally::transport::test {

std::vector<FakeDmaBufRegistration> fakeDmaBufRegistrations() {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  return fake::g_dmabuf_regs;
}

std::vector<uint64_t> fakeReadAddresses() {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  return fake::g_read_addrs;
}

}  // namespace tally::transport::test
