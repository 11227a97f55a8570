// SPDX-License-Identifier: Apache-2.0
#include "common/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace tally {
namespace {

using Clock = std::chrono::steady_clock;

// Deadline helper: timeout_ms < 0 means "never".
class Deadline {
 public:
  explicit Deadline(int64_t timeout_ms)
      : forever_(timeout_ms < 0), at_(Clock::now() + std::chrono::milliseconds(timeout_ms)) {}
  bool passed() const { return !forever_ && Clock::now() >= at_; }
  bool forever() const { return forever_; }
  Clock::time_point at() const { return at_; }

 private:
  bool forever_;
  Clock::time_point at_;
};

Status checkKey(const std::string& key) {
  if (key.empty()) return Status::internal("store key is empty");
  return Status::ok();
}

Status missing(const std::string& key, int64_t timeout_ms) {
  return Status::timeout("store key " + key + " did not appear within " +
                         std::to_string(timeout_ms) + " ms");
}

class MemoryStore final : public Store {
 public:
  Status set(const std::string& key, std::string_view value) override {
    TALLY_RETURN_IF_ERROR(checkKey(key));
    {
      std::lock_guard<std::mutex> lock(mu_);
      values_[key] = std::string(value);
    }
    cv_.notify_all();
    return Status::ok();
  }

  Status get(const std::string& key, std::string* value, int64_t timeout_ms) override {
    TALLY_RETURN_IF_ERROR(checkKey(key));
    std::unique_lock<std::mutex> lock(mu_);
    std::string missing_key;
    if (!waitLocked(lock, {key}, timeout_ms, &missing_key)) return missing(key, timeout_ms);
    *value = values_.at(key);
    return Status::ok();
  }

  Status wait(const std::vector<std::string>& keys, int64_t timeout_ms) override {
    for (const auto& key : keys) TALLY_RETURN_IF_ERROR(checkKey(key));
    std::unique_lock<std::mutex> lock(mu_);
    std::string missing_key;
    if (!waitLocked(lock, keys, timeout_ms, &missing_key)) return missing(missing_key, timeout_ms);
    return Status::ok();
  }

  bool check(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    return values_.count(key) != 0;
  }

 private:
  // Returns false on timeout with the first missing key in *missing_key. Holds `lock` on return.
  bool waitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                  int64_t timeout_ms, std::string* missing_key) {
    Deadline deadline(timeout_ms);
    auto first_missing = [&]() -> const std::string* {
      for (const auto& key : keys) {
        if (values_.count(key) == 0) return &key;
      }
      return nullptr;
    };
    for (;;) {
      const std::string* m = first_missing();
      if (m == nullptr) return true;
      if (deadline.forever()) {
        cv_.wait(lock);
      } else if (cv_.wait_until(lock, deadline.at()) == std::cv_status::timeout) {
        m = first_missing();
        if (m == nullptr) return true;
        *missing_key = *m;
        return false;
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

// RAII file descriptor for the file store.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports the error close() returned, if any.
  int release() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

class FileStore final : public Store {
 public:
  explicit FileStore(std::string directory) : directory_(std::move(directory)) {}

  Status set(const std::string& key, std::string_view value) override {
    TALLY_RETURN_IF_ERROR(checkKey(key));
    // The temporary name is unique per process and call; it starts with '.', which encoded keys
    // never do, so it cannot collide with a key.
    std::string tmp = directory_ + "/.tmp." + std::to_string(::getpid()) + "." +
                      std::to_string(counter_.fetch_add(1)) + "." + encode(key);
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) return Status::fromErrno("store: cannot create " + tmp, errno);
    size_t done = 0;
    while (done < value.size()) {
      ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        return Status::fromErrno("store: cannot write " + tmp, err);
      }
      done += static_cast<size_t>(n);
    }
    if (fd.release() != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return Status::fromErrno("store: cannot close " + tmp, err);
    }
    std::string path = pathOf(key);
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return Status::fromErrno("store: cannot rename " + tmp + " to " + path, err);
    }
    return Status::ok();
  }

  Status get(const std::string& key, std::string* value, int64_t timeout_ms) override {
    TALLY_RETURN_IF_ERROR(checkKey(key));
    TALLY_RETURN_IF_ERROR(wait({key}, timeout_ms));
    std::string path = pathOf(key);
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return Status::fromErrno("store: cannot open " + path, errno);
    std::string data;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::fromErrno("store: cannot read " + path, errno);
      if (n == 0) break;
      data.append(buf, static_cast<size_t>(n));
    }
    *value = std::move(data);
    return Status::ok();
  }

  Status wait(const std::vector<std::string>& keys, int64_t timeout_ms) override {
    for (const auto& key : keys) TALLY_RETURN_IF_ERROR(checkKey(key));
    Deadline deadline(timeout_ms);
    auto sleep = std::chrono::milliseconds(1);
    size_t next = 0;  // keys before `next` were seen; files are never removed
    for (;;) {
      while (next < keys.size() && exists(keys[next])) ++next;
      if (next == keys.size()) return Status::ok();
      if (deadline.passed()) return missing(keys[next], timeout_ms);
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, std::chrono::milliseconds(10));
    }
  }

  bool check(const std::string& key) override { return !key.empty() && exists(key); }

 private:
  // Keys may hold any byte; file names keep [A-Za-z0-9_-] and '.' (not first), and write every
  // other byte as %XX.
  static std::string encode(const std::string& key) {
    static const char kHex[] = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < key.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(key[i]);
      bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '-' || (c == '.' && i > 0);
      if (plain) {
        out.push_back(static_cast<char>(c));
      } else {
        out.push_back('%');
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 15]);
      }
    }
    return out;
  }

  std::string pathOf(const std::string& key) const { return directory_ + "/" + encode(key); }

  bool exists(const std::string& key) const {
    struct stat st;
    return ::stat(pathOf(key).c_str(), &st) == 0;
  }

  std::string directory_;
  std::atomic<uint64_t> counter_{0};
};

class PrefixStore final : public Store {
 public:
  PrefixStore(Store* base, std::string prefix) : base_(base), prefix_(std::move(prefix) + "/") {}

  Status set(const std::string& key, std::string_view value) override {
    return base_->set(prefix_ + key, value);
  }
  Status get(const std::string& key, std::string* value, int64_t timeout_ms) override {
    return base_->get(prefix_ + key, value, timeout_ms);
  }
  Status wait(const std::vector<std::string>& keys, int64_t timeout_ms) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (const auto& key : keys) full.push_back(prefix_ + key);
    return base_->wait(full, timeout_ms);
  }
  bool check(const std::string& key) override { return base_->check(prefix_ + key); }

 private:
  Store* base_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<Store> createMemoryStore() { return std::make_unique<MemoryStore>(); }

Status createFileStore(const std::string& directory, std::unique_ptr<Store>* out) {
  struct stat st;
  if (::stat(directory.c_str(), &st) != 0) {
    return Status::fromErrno("store: cannot use directory " + directory, errno);
  }
  if (!S_ISDIR(st.st_mode))
    return Status::invalidUsage("store: " + directory + " is not a directory");
  *out = std::make_unique<FileStore>(directory);
  return Status::ok();
}

std::unique_ptr<Store> createPrefixStore(Store* base, std::string prefix) {
  return std::make_unique<PrefixStore>(base, std::move(prefix));
}

Status storeBarrier(Store* store, const std::string& name, int rank, int nranks,
                    int64_t timeout_ms) {
  TALLY_RETURN_IF_ERROR(store->set(name + "/" + std::to_string(rank), ""));
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) keys.push_back(name + "/" + std::to_string(r));
  return store->wait(keys, timeout_ms);
}

}  // namespace tally
