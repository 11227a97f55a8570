// SPDX-License-Identifier: Apache-2.0
/* Loads a packaged libnccl-net-tally.so the way NCCL does and checks that it exports the
 * version 11 and 12 net and CollNet tables (those NCCL 2.28/2.29 and 2.30 pick), each named
 * "Tally".
 *   tally_package_plugin_check PATH...     dlopen(PATH, RTLD_NOW | RTLD_LOCAL), for
 *                                          NCCL_NET_PLUGIN=PATH and the libnccl-net.so link
 *   tally_package_plugin_check --global    dlopen(NULL): the process's global scope, where NCCL
 *                                          looks for NCCL_NET_PLUGIN=STATIC_PLUGIN; run it with
 *                                          LD_PRELOAD=.../libnccl-net-tally.so
 * Exit status 0 when every check passes. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "plugin/abi/abi.h"

static const char* const kSymbols[] = {
    TALLY_NET_PLUGIN_SYMBOL_V11,
    TALLY_COLLNET_PLUGIN_SYMBOL_V11,
    TALLY_NET_PLUGIN_SYMBOL_V12,
    TALLY_COLLNET_PLUGIN_SYMBOL_V12,
};
enum { kNumSymbols = sizeof(kSymbols) / sizeof(kSymbols[0]) };

static int checkOne(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const char* what = path != NULL ? path : "global scope";
  int ok = 1;
  int i;
  if (handle == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", what, dlerror());
    return 0;
  }
  for (i = 0; i < kNumSymbols; ++i) {
    /* Every table starts with its name. */
    const char* const* table = (const char* const*)dlsym(handle, kSymbols[i]);
    if (table == NULL || *table == NULL || strcmp(*table, "Tally") != 0) {
      fprintf(stderr, "%s: no %s table named Tally\n", what, kSymbols[i]);
      ok = 0;
    }
  }
  if (ok) {
    printf("%s:", what);
    for (i = 0; i < kNumSymbols; ++i) printf(" %s", kSymbols[i]);
    printf(" found\n");
  }
  dlclose(handle);
  return ok;
}

int main(int argc, char** argv) {
  int failures = 0;
  int i;
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLUGIN_PATH... | --global\n", argv[0]);
    return 2;
  }
  if (argc == 2 && strcmp(argv[1], "--global") == 0) return checkOne(NULL) ? 0 : 1;
  for (i = 1; i < argc; ++i) {
    if (!checkOne(argv[i])) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
