// SPDX-License-Identifier: Apache-2.0
// What `tally launch` does in this replica, worked out from the cluster variables without touching
// the process: which role it plays, which program it execs and which environment variables it
// sets, keeps or removes. launch.cc carries the plan out; tests check it directly.
//
//   pool 0, 1 (primary, workers)  set NCCL_NET_PLUGIN, NCCL_COLLNET_ENABLE=1, NCCL_ALGO,
//                                 TALLY_REDUCERS, MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK;
//                                 exec CMD
//   pool 2 (reducers)             exec tally-reducer --listen 0.0.0.0:<own port> ([::] for an
//                                 IPv6 address; a Slurm node: its own host:port); the workers
//                                 reach it by the name the spec gives it; CMD is not run
//   pool 3 (evaluators)           exec CMD without the plugin (a Tally NCCL_NET_PLUGIN or
//                                 LD_PRELOAD set by the image is removed)
//   no CLUSTER_SPEC nor TF_CONFIG exec CMD unchanged
//
// A variable the environment already holds (non-empty) is never overwritten: the plan keeps it
// and says so. Everything here is pure: no getenv, no output, no exec.
#pragma once

#include <string>
#include <vector>

#include "common/cluster.h"
#include "common/params.h"
#include "common/status.h"

namespace tally::commands {

struct EnvChange {
  enum class Kind {
    kSet,    // export name=value
    kKept,   // the environment already has name=value; left alone
    kUnset,  // name (whose value was `value`) is removed
  };
  Kind kind = Kind::kSet;
  std::string name;
  std::string value;
};

struct LaunchPlan {
  ClusterRole role = ClusterRole::kPrimary;
  bool has_spec = false;  // false: neither variable is set and argv is CMD unchanged
  // One line on who this replica is, e.g. "worker (CLUSTER_SPEC workerpool1 index 1), CollNet
  // rank 2 of 3, reducers from CLUSTER_SPEC workerpool2".
  std::string summary;
  // The program and its arguments; argv[0] is looked up in PATH when it has no slash.
  std::vector<std::string> argv;
  // In the order they are applied.
  std::vector<EnvChange> env;
  // What the user must know, one sentence each; those that start with "WARNING:" mean the job
  // will run without something it probably wants (CollNet off, CMD ignored).
  std::vector<std::string> notes;
};

// Plans the launch of `command` in the replica `cluster` describes. `env` is this process's
// environment (read for user-set values, TALLY_REDUCERS and TALLY_REDUCER_ARGS). `plugin_path`
// is what NCCL_NET_PLUGIN gets, `reducer_path` the tally-reducer that pool 2 execs, listening on
// every address at its replica's port (on Slurm, at the node's own address), with
// TALLY_REDUCER_ARGS after its --listen.
// Fails with kInvalidUsage when `command` is empty but would be run (every case except pool 2),
// when an address in the spec is not host:port, or when TALLY_REDUCER_ARGS does not split or
// sets --listen. *out is written only on success.
// Splits `text` into words as a shell does, expanding nothing: blanks separate words, single
// quotes keep everything up to the next one, double quotes everything but an escaped `"` or `\`,
// and a backslash outside quotes keeps the next character. kInvalidUsage for an unterminated
// quote or a trailing backslash ("has an unterminated '").
Status splitShellWords(const std::string& text, std::vector<std::string>* words);

Status planLaunch(const ClusterEnv& cluster, const ParamSource& env, const std::string& plugin_path,
                  const std::string& reducer_path, const std::vector<std::string>& command,
                  LaunchPlan* out);

// loadJobCluster(env) followed by planLaunch: a malformed CLUSTER_SPEC, TF_CONFIG, JobSet or
// Slurm variable fails here with a message that names the variable (and the field).
Status planLaunchFromEnvironment(const ParamSource& env, const std::string& plugin_path,
                                 const std::string& reducer_path,
                                 const std::vector<std::string>& command, LaunchPlan* out);

// `text` as one shell word inside single quotes: it's -> 'it'\''s'.
std::string shellQuote(const std::string& text);
// `text` unchanged when the shell reads it as one plain word in argument position (after a
// command name), else shellQuote(text).
std::string shellWord(const std::string& text);

// The --dry-run output: "# tally launch: <summary>", one line per change (export NAME='value',
// "# kept NAME='value', set by the environment", unset NAME), each note as a comment, and the
// command as "exec ARGS...". Every line ends in '\n'; the text is a valid sh script.
std::string dryRunText(const LaunchPlan& plan);

// The report printed on stderr before the exec, without the "tally launch: " prefix: the
// summary, one line per change ("set NAME=value", "kept NAME=value, set by the environment",
// "unset NAME"), the notes, and "exec ARGS...".
std::vector<std::string> reportLines(const LaunchPlan& plan);

}  // namespace tally::commands
