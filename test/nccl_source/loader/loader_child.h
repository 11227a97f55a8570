// SPDX-License-Identifier: Apache-2.0
// One process of the loader tests: NCCL's own plugin loader, compiled from NCCL's source, run
// through a script of communicator steps the way ncclCommInitRank and ncclCommDestroy call it.
// No NCCL type appears here; loader_child.cc holds the NCCL side.
//
// The script is a comma-separated list of steps:
//   init:NAME   a new communicator NAME: NCCL_NET (when set) becomes its config.netName, as
//               NCCL's init does; then NCCL's ncclNetInit (on NCCL before the plugin-folder
//               loader, the process-wide ncclNetPluginInit runs once first, as ncclInit does)
//   fin:NAME    NCCL's ncclNetFinalize of that communicator (a no-op on NCCL without one)
//
// Each step prints one line on stdout:
//   init NAME rc=<ncclResult_t> net=<name|-> table=<symbol|adapter|-> coll=<name|->
//        colltable=<symbol|adapter|-> colldevs=<n>       (one line)
//   fin NAME rc=<ncclResult_t> loaded=<0|1>
// where table is the exported symbol NCCL uses as it is (ncclNetPlugin_v11), "adapter" when NCCL
// calls the plugin through a table of its own, colldevs is the CollNet device count as NCCL's
// communicator init computes it (0 without CollNet), and loaded says whether the plugin library
// is still mapped. After the last step every line NCCL (and the plugin, through NCCL's logger)
// logged follows, each as "log <LEVEL> <text>".
#pragma once

namespace tally::nccl_source {

// Runs `script` in this process, printing as above. `plugin_path` is the built plugin, used only
// to tell whether it is still loaded. Returns 0 when every step ran (whatever NCCL returned), 2
// for a malformed script.
int runLoaderScript(const char* script, const char* plugin_path);

// NCCL_VERSION_CODE of the NCCL the child was compiled from.
int loaderNcclVersionCode();

}  // namespace tally::nccl_source
