// SPDX-License-Identifier: Apache-2.0
// reduce(): argument checks and the one-time choice of instruction set.
#include "kernels/kernels.h"

#include "common/log.h"
#if TALLY_KERNELS_X86
#include <cpuid.h>
#endif
#include "kernels/kernels_loops.h"

namespace tally {
namespace {

using ReduceFn = void (*)(DataType, ReduceOp, void*, const void* const*, int, size_t);

#if TALLY_KERNELS_X86
// F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
bool cpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

bool cpuHasAvx2() {
#if TALLY_KERNELS_X86
  // The compiler's cpu model also checks that the OS saves the AVX state (XCR0).
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpuHasF16c();
#else
  return false;
#endif
}

bool cpuHasAvx512() {
#if TALLY_KERNELS_X86
  return cpuHasAvx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

ReduceFn functionFor(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kGeneric: return &kernels_detail::reduceGeneric;
#if TALLY_KERNELS_X86
    case KernelIsa::kAvx2: return &kernels_detail::reduceAvx2;
    case KernelIsa::kAvx512: return &kernels_detail::reduceAvx512;
#else
    case KernelIsa::kAvx2:
    case KernelIsa::kAvx512: return nullptr;
#endif
  }
  return nullptr;
}

KernelIsa bestIsa() {
  if (cpuHasAvx512()) return KernelIsa::kAvx512;
  if (cpuHasAvx2()) return KernelIsa::kAvx2;
  return KernelIsa::kGeneric;
}

// Chosen once; a function-local static is initialized thread-safely.
KernelIsa chosenIsa() {
  static const KernelIsa isa = bestIsa();
  return isa;
}

bool validArgs(DataType type, ReduceOp op, int nsrcs) {
  if (!isValidDataType(static_cast<int>(type)) || !isValidReduceOp(static_cast<int>(op)) ||
      nsrcs < 1) {
    TALLY_WARN("reduce: invalid arguments (type %d, op %d, nsrcs %d); nothing done",
               static_cast<int>(type), static_cast<int>(op), nsrcs);
    return false;
  }
  return true;
}

}  // namespace

void reduce(DataType type, ReduceOp op, void* dst, const void* const* srcs, int nsrcs,
            size_t count) {
  if (count == 0 || !validArgs(type, op, nsrcs)) return;
  static const ReduceFn fn = functionFor(chosenIsa());
  fn(type, op, dst, srcs, nsrcs, count);
}

const char* reduceKernelIsa() { return kernelIsaName(chosenIsa()); }

const char* kernelIsaName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kGeneric: return "generic";
    case KernelIsa::kAvx2: return "avx2";
    case KernelIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

bool kernelIsaSupported(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kGeneric: return true;
    case KernelIsa::kAvx2: return cpuHasAvx2();
    case KernelIsa::kAvx512: return cpuHasAvx512();
  }
  return false;
}

void reduceWithIsa(KernelIsa isa, DataType type, ReduceOp op, void* dst, const void* const* srcs,
                   int nsrcs, size_t count) {
  if (!kernelIsaSupported(isa)) {
    TALLY_WARN("reduce: instruction set %s is not available on this CPU", kernelIsaName(isa));
    return;
  }
  if (count == 0 || !validArgs(type, op, nsrcs)) return;
  functionFor(isa)(type, op, dst, srcs, nsrcs, count);
}

}  // namespace tally
