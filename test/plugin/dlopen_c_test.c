// SPDX-License-Identifier: Apache-2.0
/* Loads the built libnccl-net-tally.so the way NCCL does (dlopen RTLD_NOW | RTLD_LOCAL), finds
 * every table Tally claims (net and CollNet v8 to v12, tuner v2 to v6), and checks that `nm -D --defined-only` lists those and
 * nothing else. Plain C, so it also proves plugin/abi/ compiles as C with its static asserts. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/abi/abi.h"

static int failures = 0;

#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                    \
    }                                                                \
  } while (0)

static const char* const kSymbols[] = {
    TALLY_NET_PLUGIN_SYMBOL_V8,      TALLY_NET_PLUGIN_SYMBOL_V9,
    TALLY_NET_PLUGIN_SYMBOL_V10,     TALLY_NET_PLUGIN_SYMBOL_V11,
    TALLY_NET_PLUGIN_SYMBOL_V12,     TALLY_COLLNET_PLUGIN_SYMBOL_V8,
    TALLY_COLLNET_PLUGIN_SYMBOL_V9,  TALLY_COLLNET_PLUGIN_SYMBOL_V10,
    TALLY_COLLNET_PLUGIN_SYMBOL_V11, TALLY_COLLNET_PLUGIN_SYMBOL_V12,
    TALLY_TUNER_PLUGIN_SYMBOL_V2,    TALLY_TUNER_PLUGIN_SYMBOL_V3,
    TALLY_TUNER_PLUGIN_SYMBOL_V4,    TALLY_TUNER_PLUGIN_SYMBOL_V5,
    TALLY_TUNER_PLUGIN_SYMBOL_V6,
};
enum { kNumSymbols = sizeof(kSymbols) / sizeof(kSymbols[0]) };

static int log_lines = 0;
static void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                   const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  (void)flags;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  ++log_lines;
  if (strncmp(buf, "NET/Tally : ", 12) != 0) {
    fprintf(stderr, "log line without prefix: %s\n", buf);
    ++failures;
  }
  if (level == NCCL_LOG_WARN) fprintf(stderr, "plugin WARN %s:%d %s\n", file, line, buf);
}

static void checkExports(void) {
  char cmd[4096];
  char line[1024];
  int seen[kNumSymbols] = {0};
  int others = 0;
  FILE* nm;
  int i;
  snprintf(cmd, sizeof(cmd), "'%s' -D --defined-only '%s'", TALLY_NM, TALLY_PLUGIN_PATH);
  nm = popen(cmd, "r");
  CHECK(nm != NULL);
  if (nm == NULL) return;
  while (fgets(line, sizeof(line), nm) != NULL) {
    char addr[64], type[8], name[512];
    int matched = 0;
    if (sscanf(line, "%63s %7s %511s", addr, type, name) != 3) continue;
    for (i = 0; i < kNumSymbols; ++i) {
      if (strcmp(name, kSymbols[i]) == 0) {
        seen[i] = 1;
        matched = 1;
      }
    }
    if (!matched) {
      fprintf(stderr, "unexpected exported symbol: %s", line);
      ++others;
    }
  }
  CHECK(pclose(nm) == 0);
  for (i = 0; i < kNumSymbols; ++i) {
    if (!seen[i]) fprintf(stderr, "nm does not list %s\n", kSymbols[i]);
    CHECK(seen[i]);
  }
  CHECK(others == 0);
}

int main(void) {
  void* lib = dlopen(TALLY_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  int i;
  if (lib == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", TALLY_PLUGIN_PATH, dlerror());
    return 1;
  }
  for (i = 0; i < kNumSymbols; ++i) {
    /* Every table starts with its name. */
    const char* const* table = (const char* const*)dlsym(lib, kSymbols[i]);
    if (table == NULL) fprintf(stderr, "dlsym %s: %s\n", kSymbols[i], dlerror());
    CHECK(table != NULL);
    if (table != NULL) CHECK(strcmp(*table, "Tally") == 0);
  }

  {
    const ncclNet_v11_t* net = (const ncclNet_v11_t*)dlsym(lib, "ncclNetPlugin_v11");
    const ncclCollNet_v11_t* coll = (const ncclCollNet_v11_t*)dlsym(lib, "ncclCollNetPlugin_v11");
    CHECK(net != NULL && coll != NULL);
    if (net != NULL && coll != NULL) {
      ncclNetCommConfig_v11_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
      void* ctx = NULL;
      void* coll_ctx = NULL;
      int supported = -1;
      /* The minimum NCCL needs: finalize and the data-path slots are set. */
      CHECK(net->finalize != NULL && net->isend != NULL && net->test != NULL);
      CHECK(coll->finalize != NULL && coll->iallreduce != NULL);
      CHECK(coll->iallgather != NULL && coll->ireducescatter != NULL);
      if (net->init(&ctx, 42, &config, logger, NULL) == ncclSuccess) {
        int ndev = 0;
        CHECK(ctx != NULL);
        CHECK(net->devices(&ndev) == ncclSuccess);
        CHECK(ndev >= 1);
        if (ndev >= 1) {
          ncclNetProperties_v11_t props;
          memset(&props, 0, sizeof(props));
          CHECK(net->getProperties(0, &props) == ncclSuccess);
          CHECK(props.name != NULL && props.ptrSupport == NCCL_PTR_HOST);
        }
        CHECK(coll->init(&coll_ctx, 42, logger) == ncclSuccess);
        /* A ctx exactly when CollNet has devices (unless TALLY_COLLNET=0): NCCL finalizes
         * CollNet only while it is enabled, so without devices there must be nothing to
         * finalize. */
        {
          int ncoll = -1;
          CHECK(coll->devices(&ncoll) == ncclSuccess);
          CHECK((coll_ctx != NULL) == (ncoll > 0));
        }
        CHECK(coll->reduceSupport(ncclFloat32, ncclSum, &supported) == ncclSuccess);
        CHECK(supported == 1);
        CHECK(coll->finalize(coll_ctx) == ncclSuccess);
        CHECK(net->finalize(ctx) == ncclSuccess);
        CHECK(log_lines > 0);
      } else {
        fprintf(stderr, "note: init failed in this environment; skipping the init checks\n");
      }
      /* finalize accepts a ctx init never set. */
      CHECK(net->finalize(NULL) == ncclSuccess);
    }
  }

  {
    /* v12, the table NCCL 2.30 picks: the same must-set slots, and getProperties writes the
     * 128-byte layout with no rail or plane. */
    const ncclNet_v12_t* net = (const ncclNet_v12_t*)dlsym(lib, TALLY_NET_PLUGIN_SYMBOL_V12);
    const ncclCollNet_v12_t* coll =
        (const ncclCollNet_v12_t*)dlsym(lib, TALLY_COLLNET_PLUGIN_SYMBOL_V12);
    CHECK(net != NULL && coll != NULL);
    if (net != NULL && coll != NULL) {
      ncclNetCommConfig_v12_t config = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
      void* ctx = NULL;
      CHECK(net->finalize != NULL && net->isend != NULL && net->test != NULL);
      CHECK(coll->finalize != NULL && coll->iallreduce != NULL);
      if (net->init(&ctx, 43, &config, logger, NULL) == ncclSuccess) {
        ncclNetProperties_v12_t props;
        memset(&props, 0xab, sizeof(props));
        CHECK(net->getProperties(0, &props) == ncclSuccess);
        CHECK(props.name != NULL && props.ptrSupport == NCCL_PTR_HOST);
        CHECK(props.railId == NCCL_NET_ID_UNDEF && props.planeId == NCCL_NET_ID_UNDEF);
        CHECK(props.vProps.ndevs == 1 && props.vProps.devs[0] == 0);
        CHECK(net->finalize(ctx) == ncclSuccess);
      }
    }
  }

  checkExports();
  CHECK(dlclose(lib) == 0);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("plugin_dlopen_c_test: OK\n");
  return failures ? 1 : 0;
}
