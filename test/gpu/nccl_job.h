// SPDX-License-Identifier: Apache-2.0
// One checked all-reduce for nccl_check.cc: its own device and host buffers, inputs written from
// values.h, a launch on a stream, a bounded wait, and an element-by-element comparison with the
// host reference. Uses NCCL's and CUDA's public APIs (the system's nccl.h and cuda_runtime.h).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "test/gpu/values.h"

namespace tally::gpucheck {

static_assert(ncclInt8 == 0 && ncclFloat16 == 6 && ncclBfloat16 == 9 && ncclFloat8e5m2 == 11 &&
                  ncclNumTypes == kNumTypes,
              "values.h numbers the types as NCCL does");
static_assert(int{ncclSum} == int{kSum} && int{ncclAvg} == int{kAvg} && ncclNumOps == kNumOps,
              "values.h numbers the ops as NCCL does");

inline bool cudaOk(cudaError_t e, const char* what, std::string* err) {
  if (e == cudaSuccess) return true;
  *err = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}

inline bool ncclOk(ncclResult_t r, const char* what, std::string* err) {
  if (r == ncclSuccess) return true;
  *err = std::string(what) + ": " + ncclGetErrorString(r);
  return false;
}

// Polls the stream until its work is done, the communicator reports an error, or timeout_s pass.
inline bool waitStream(ncclComm_t comm, cudaStream_t stream, int timeout_s, std::string* err) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return true;
    if (q != cudaErrorNotReady) return cudaOk(q, "cudaStreamQuery", err);
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress) {
      *err = std::string("communicator error: ") + ncclGetErrorString(async) + ": " +
             ncclGetLastError(comm);
      return false;
    }
    if (std::chrono::steady_clock::now() > end) {
      *err = "no completion within " + std::to_string(timeout_s) + " s";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

class Job {
 public:
  Job(int type, int op, size_t count, bool in_place, uint64_t seed)
      : type_(type), op_(op), count_(count), in_place_(in_place), seed_(seed) {}
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  ~Job() {
    if (send_ != nullptr) cudaFree(send_);
    if (recv_ != nullptr) cudaFree(recv_);
  }

  size_t bytes() const { return count_ * static_cast<size_t>(typeInfo(type_).bytes); }
  std::string describe() const {
    return std::string(typeInfo(type_).name) + " " + opName(op_) + " " + std::to_string(count_) +
           (in_place_ ? " in-place" : " out-of-place");
  }

  // Writes this rank's inputs (as `rank` of `nranks`) and clears the output on the device.
  bool prepare(int rank, int nranks, std::string* err) {
    rank_ = rank;
    nranks_ = nranks;
    host_.assign(bytes(), 0);
    for (size_t i = 0; i < count_; ++i) {
      if (!store(type_, inputValue(type_, op_, rank, nranks, i, seed_), host_.data(), i)) {
        *err = "input not exact in " + describe();
        return false;
      }
    }
    if (recv_ == nullptr && !cudaOk(cudaMalloc(&recv_, bytes()), "cudaMalloc", err)) return false;
    if (!in_place_ && send_ == nullptr && !cudaOk(cudaMalloc(&send_, bytes()), "cudaMalloc", err)) {
      return false;
    }
    void* input = in_place_ ? recv_ : send_;
    if (!in_place_ && !cudaOk(cudaMemset(recv_, 0xa5, bytes()), "cudaMemset", err)) return false;
    return cudaOk(cudaMemcpy(input, host_.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy",
                  err);
  }

  bool launch(ncclComm_t comm, cudaStream_t stream, std::string* err) {
    return ncclOk(
        ncclAllReduce(in_place_ ? recv_ : send_, recv_, count_, static_cast<ncclDataType_t>(type_),
                      static_cast<ncclRedOp_t>(op_), comm, stream),
        "ncclAllReduce", err);
  }

  // Copies the result back and compares every element; the count of wrong ones, -1 on a CUDA
  // error. The first few are described in *err.
  long verify(std::string* err) {
    if (!cudaOk(cudaMemcpy(host_.data(), recv_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy",
                err)) {
      return -1;
    }
    long wrong = 0;
    for (size_t i = 0; i < count_; ++i) {
      const double want = static_cast<double>(expectedValue(type_, op_, nranks_, i, seed_));
      const double got = load(type_, host_.data(), i);
      if (std::fabs(got - want) <= avgTolerance(type_, op_, nranks_, want)) continue;
      if (wrong++ < 3) {
        char line[160];
        std::snprintf(line, sizeof(line), "%s[%zu]: got %.17g, want %.17g; ", describe().c_str(), i,
                      got, want);
        *err += line;
      }
    }
    return wrong;
  }

  // prepare, launch, wait, verify: true when every element is right.
  bool run(ncclComm_t comm, cudaStream_t stream, int rank, int nranks, int timeout_s,
           std::string* err) {
    if (!prepare(rank, nranks, err) || !launch(comm, stream, err) ||
        !waitStream(comm, stream, timeout_s, err)) {
      *err = describe() + ": " + *err;
      return false;
    }
    const long wrong = verify(err);
    if (wrong > 0) *err += std::to_string(wrong) + " wrong element(s) in " + describe();
    return wrong == 0;
  }

 private:
  int type_;
  int op_;
  size_t count_;
  bool in_place_;
  uint64_t seed_;
  int rank_ = 0;
  int nranks_ = 1;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  std::vector<unsigned char> host_;
};

}  // namespace tally::gpucheck
