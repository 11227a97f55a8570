/* Loads a packaged libnccl-net-tally.so the way NCCL does and checks that it exports the
 * version 11 net and CollNet tables, each named "Tally".
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

static int checkOne(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const char* what = path != NULL ? path : "global scope";
  const ncclNet_v11_t* net;
  const ncclCollNet_v11_t* coll;
  int ok = 1;
  if (handle == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", what, dlerror());
    return 0;
  }
  net = (const ncclNet_v11_t*)dlsym(handle, TALLY_NET_PLUGIN_SYMBOL_V11);
  coll = (const ncclCollNet_v11_t*)dlsym(handle, TALLY_COLLNET_PLUGIN_SYMBOL_V11);
  if (net == NULL || net->name == NULL || strcmp(net->name, "Tally") != 0) {
    fprintf(stderr, "%s: no %s table named Tally\n", what, TALLY_NET_PLUGIN_SYMBOL_V11);
    ok = 0;
  }
  if (coll == NULL || coll->name == NULL || strcmp(coll->name, "Tally") != 0) {
    fprintf(stderr, "%s: no %s table named Tally\n", what, TALLY_COLLNET_PLUGIN_SYMBOL_V11);
    ok = 0;
  }
  if (ok) printf("%s: %s and %s found\n", what, TALLY_NET_PLUGIN_SYMBOL_V11,
                 TALLY_COLLNET_PLUGIN_SYMBOL_V11);
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
