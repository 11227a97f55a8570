// What sending a reducer's results from a memfd with sendfile(2) would save on loopback. One
// thread writes each 128 KiB result into a block of an 8 MiB arena (as the fold does) and sends
// it to 4 receiving sockets (as a reducer sends a result to 4 ranks); 4 threads read them into
// buffers of their own. Modes: "send" copies each result into the kernel once per receiver (what
// the reducer does); "sendfile" hands the arena's pages to the kernel by reference and reuses a
// block 64 results later (the cost only: it does not wait for the readers, so a slow reader could
// read a later result; a real design must know the block was read, see ../../../performance.md);
// "punch" hands them over and then punches the block out of the memfd, so the next result in it
// gets fresh pages (safe without knowing, at the price of a page fault and a zeroed page per
// 4 KiB). Prints the sending thread's and the readers' CPU seconds per GiB sent.
// Build: g++ -O2 -o sendfile_probe sendfile_probe.cc -lpthread
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

double threadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

constexpr size_t kBlock = 128 << 10;
constexpr size_t kBlocks = 64;
constexpr size_t kPerReader = size_t(1) << 30;
constexpr int kReaders = 4;

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "send";
  if (mode != "send" && mode != "sendfile" && mode != "punch") {
    std::fprintf(stderr, "usage: %s send|sendfile|punch\n", argv[0]);
    return 2;
  }
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listener, 8) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("listen");
    return 1;
  }
  std::vector<int> out(kReaders), in(kReaders);
  for (int i = 0; i < kReaders; ++i) {
    in[i] = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(in[i], reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      std::perror("connect");
      return 1;
    }
    out[i] = accept(listener, nullptr, nullptr);
  }
  const int mfd = memfd_create("results", 0);
  if (mfd < 0 || ftruncate(mfd, kBlock * kBlocks) != 0) {
    std::perror("memfd");
    return 1;
  }
  auto* arena = static_cast<uint8_t*>(
      mmap(nullptr, kBlock * kBlocks, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0));
  if (arena == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  std::vector<double> reader_cpu(kReaders);
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      std::vector<uint8_t> buf(kBlock);
      const double c0 = threadCpuSeconds();
      for (size_t got = 0; got < kPerReader;) {
        const ssize_t n = recv(in[i], buf.data(), buf.size(), 0);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      reader_cpu[i] = threadCpuSeconds() - c0;
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = threadCpuSeconds();
  for (size_t k = 0; k * kBlock < kPerReader; ++k) {
    const size_t b = k % kBlocks;
    uint8_t* block = arena + b * kBlock;
    std::memset(block, static_cast<int>(k), kBlock);  // the result lands in its block
    for (int i = 0; i < kReaders; ++i) {
      off_t offset = static_cast<off_t>(b * kBlock);
      for (size_t left = kBlock; left > 0;) {
        const ssize_t n = mode == "send" ? send(out[i], block + (kBlock - left), left, 0)
                                         : sendfile(out[i], mfd, &offset, left);
        if (n <= 0) {
          std::perror("send");
          return 1;
        }
        left -= static_cast<size_t>(n);
      }
    }
    if (mode == "punch" &&
        fallocate(mfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(b * kBlock),
                  kBlock) != 0) {
      std::perror("fallocate");
      return 1;
    }
  }
  const double sender_cpu = threadCpuSeconds() - c0;
  for (std::thread& t : readers) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double gib = static_cast<double>(kPerReader) * kReaders / (1 << 30);
  double readers_cpu = 0;
  for (double c : reader_cpu) readers_cpu += c;
  std::printf("%-8s sender %.3f s/GiB  readers %.3f s/GiB  %.2f GB/s\n", mode.c_str(),
              sender_cpu / gib, readers_cpu / gib, gib * 1.073741824 / seconds);
  return 0;
}
