// SPDX-License-Identifier: Apache-2.0
/* Everything of NCCL's net/CollNet plugin ABI that Tally declares: the basic types, and the v8,
 * v9, v10, v11 and v12 tables with their structs, and the tuner tables v2 to v6. Self-contained C; include this one header.
 *
 * Exported symbol names (data objects, not functions):
 *   ncclNetPlugin_v8 .. ncclNetPlugin_v12          of type ncclNet_vN_t
 *   ncclCollNetPlugin_v8 .. ncclCollNetPlugin_v12  of type ncclCollNet_vN_t
 *   ncclTunerPlugin_v2 .. ncclTunerPlugin_v6      of type ncclTuner_vN_t (tuner.h)
 */
#ifndef TALLY_PLUGIN_ABI_ABI_H_
#define TALLY_PLUGIN_ABI_ABI_H_

#include "plugin/abi/nccl_types.h"
#include "plugin/abi/net_v8.h"
#include "plugin/abi/net_v9.h"
#include "plugin/abi/net_v10.h"
#include "plugin/abi/net_v11.h"
#include "plugin/abi/net_v12.h"
#include "plugin/abi/tuner.h"

#define TALLY_NET_PLUGIN_SYMBOL_V8 "ncclNetPlugin_v8"
#define TALLY_NET_PLUGIN_SYMBOL_V9 "ncclNetPlugin_v9"
#define TALLY_NET_PLUGIN_SYMBOL_V10 "ncclNetPlugin_v10"
#define TALLY_NET_PLUGIN_SYMBOL_V11 "ncclNetPlugin_v11"
#define TALLY_NET_PLUGIN_SYMBOL_V12 "ncclNetPlugin_v12"
#define TALLY_COLLNET_PLUGIN_SYMBOL_V8 "ncclCollNetPlugin_v8"
#define TALLY_COLLNET_PLUGIN_SYMBOL_V9 "ncclCollNetPlugin_v9"
#define TALLY_COLLNET_PLUGIN_SYMBOL_V10 "ncclCollNetPlugin_v10"
#define TALLY_COLLNET_PLUGIN_SYMBOL_V11 "ncclCollNetPlugin_v11"
#define TALLY_COLLNET_PLUGIN_SYMBOL_V12 "ncclCollNetPlugin_v12"
#define TALLY_TUNER_PLUGIN_SYMBOL_V2 "ncclTunerPlugin_v2"
#define TALLY_TUNER_PLUGIN_SYMBOL_V3 "ncclTunerPlugin_v3"
#define TALLY_TUNER_PLUGIN_SYMBOL_V4 "ncclTunerPlugin_v4"
#define TALLY_TUNER_PLUGIN_SYMBOL_V5 "ncclTunerPlugin_v5"
#define TALLY_TUNER_PLUGIN_SYMBOL_V6 "ncclTunerPlugin_v6"

#endif /* TALLY_PLUGIN_ABI_ABI_H_ */
