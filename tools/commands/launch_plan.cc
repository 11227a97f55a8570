// SPDX-License-Identifier: Apache-2.0
#include "tools/commands/launch_plan.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "common/strings.h"
#include "tools/commands/launch_env.h"
#include "transport/network.h"

namespace tally::commands {
namespace {

// NCCL's per-function algorithm syntax: all-reduce through CollNet chain, every other collective
// as NCCL would choose.

// A set, non-empty value; an empty variable counts as unset, as it does for NCCL.
std::optional<std::string> userValue(const ParamSource& env, const std::string& name) {
  std::optional<std::string> value = env.get(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

// Sets name=value unless the environment already has a value, which is then kept.
void setOrKeep(const ParamSource& env, const std::string& name, std::string value,
               std::vector<EnvChange>* changes) {
  if (std::optional<std::string> user = userValue(env, name)) {
    changes->push_back({EnvChange::Kind::kKept, name, std::move(*user)});
  } else {
    changes->push_back({EnvChange::Kind::kSet, name, std::move(value)});
  }
}

// `text` as sh comment lines: every line of it starts with "# ", so no part of a value or note
// with a newline in it can become a command.
std::string comment(const std::string& text) {
  std::string lines = "# ";
  for (char c : text) {
    lines += c;
    if (c == '\n') lines += "# ";
  }
  return lines + "\n";
}

std::string joinWords(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& arg : argv) {
    if (!text.empty()) text += ' ';
    text += shellWord(arg);
  }
  return text;
}

// "(CLUSTER_SPEC workerpool1 index 1, trial 7)", "(JobSet workers pod 2)"
std::string describeTask(const ClusterSpec& spec) {
  std::string text = "(" + spec.variable + " " + spec.task_type;
  if (fromClusterVariable(spec)) text += " index " + std::to_string(spec.index);
  if (!spec.trial.empty()) text += ", trial " + spec.trial;
  return text + ")";
}

// `who`: "" when there is no spec, else the role ("this worker").
Status missingCommand(const std::string& who) {
  return Status::invalidUsage("no command to run" + (who.empty() ? "" : " for this " + who) +
                              ": tally launch [--dry-run] -- CMD ARGS...");
}

// Pools 0 and 1: the plugin, CollNet, the reducers and PyTorch's rendezvous variables.
Status planCollNetRank(const ClusterEnv& cluster, const ClusterSpec& spec, const ParamSource& env,
                       const std::string& plugin_path, LaunchPlan* plan) {
  // Rank 0 is pool 0's first replica; a TF_CONFIG without a chief makes worker 0 rank 0.
  const std::vector<std::string>& rank0_pool =
      spec.pools[0].empty() ? spec.pools[1] : spec.pools[0];
  if (rank0_pool.empty()) {
    return Status::invalidUsage(spec.variable + ": cluster lists no replica for CollNet rank 0");
  }
  const std::string& master = rank0_pool.front();
  std::string master_host;
  uint16_t master_port = 0;
  Status st = splitHostPort(master, &master_host, &master_port);
  if (!st.isOk() || master_host.empty()) {
    return Status::invalidUsage(spec.variable + ": rank 0's address \"" + master +
                                "\" is not host:port, so MASTER_ADDR and MASTER_PORT are unknown");
  }

  Params params = Params::defaults();
  params.reducers = env.get("TALLY_REDUCERS").value_or("");
  ReducerList reducers = resolveReducers(params, cluster);
  if (!fromClusterVariable(spec) && reducers.origin != "TALLY_REDUCERS") {
    reducers.origin = spec.variable + " reducers";  // the scheduler's spec sits in cluster_spec
  }
  const bool collnet = !reducers.addresses.empty();

  plan->summary = std::string(clusterRoleName(spec.role())) + " " + describeTask(spec) +
                  ", CollNet rank " + std::to_string(spec.collRank()) + " of " +
                  std::to_string(spec.collRanks()) + ", " +
                  (collnet ? "reducers from " + reducers.origin : "no reducers");

  std::vector<EnvChange>& changes = plan->env;
  setOrKeep(env, "NCCL_NET_PLUGIN", plugin_path, &changes);
  // NCCL 2.27 to 2.29 unload the plugin when a process's last communicator is destroyed and
  // forget its name, so the next communicator (a PyTorch process group made again) would load
  // libnccl-net.so instead: fail with NCCL_NET=Tally, or run on NCCL's own nets. A reference
  // count of 1 keeps the library loaded; other NCCL versions ignore or do not need it.
  setOrKeep(env, "NCCL_NET_PLUGIN_REF_COUNT", "1", &changes);
  setOrKeep(env, "NCCL_COLLNET_ENABLE", "1", &changes);
  // NCCL_ALGO is left alone: Tally's tuner, which NCCL finds in the plugin's library, sends an
  // all-reduce to the reducers where the model says they are faster (docs/nccl.md).
  if (collnet) {
    if (reducers.origin == "TALLY_REDUCERS") {
      changes.push_back({EnvChange::Kind::kKept, "TALLY_REDUCERS", *env.get("TALLY_REDUCERS")});
    } else {
      changes.push_back({EnvChange::Kind::kSet, "TALLY_REDUCERS", join(reducers.addresses, ",")});
    }
  } else {
    const std::string sources =
        fromClusterVariable(spec)
            ? "TALLY_REDUCERS, CLUSTER_SPEC workerpool2 and TF_CONFIG ps "
              "are all empty"
            : "TALLY_REDUCERS and the " + spec.variable + " job's reducers are both empty";
    plan->notes.push_back("WARNING: no reducers known (" + sources +
                          "): CollNet will be off and NCCL uses its own algorithms");
  }
  setOrKeep(env, "MASTER_ADDR", master_host, &changes);
  setOrKeep(env, "MASTER_PORT", std::to_string(master_port), &changes);
  setOrKeep(env, "WORLD_SIZE", std::to_string(spec.collRanks()), &changes);
  setOrKeep(env, "RANK", std::to_string(spec.collRank()), &changes);

  for (const EnvChange& change : changes) {
    if (change.kind == EnvChange::Kind::kKept && change.name == "NCCL_COLLNET_ENABLE" &&
        change.value != "1") {
      plan->notes.push_back("WARNING: NCCL_COLLNET_ENABLE=" + change.value +
                            " from the environment turns CollNet off");
    }
    if (change.kind == EnvChange::Kind::kKept && change.name == "NCCL_NET_PLUGIN_REF_COUNT" &&
        change.value == "0") {
      plan->notes.push_back(
          "WARNING: NCCL_NET_PLUGIN_REF_COUNT=0 from the environment: NCCL 2.27 to 2.29 then "
          "cannot load Tally again for a communicator made after the last one was destroyed");
    }
  }
  return Status::ok();
}

// An image may load Tally for every pool, by NCCL_NET_PLUGIN, by LD_PRELOAD with
// NCCL_NET_PLUGIN=STATIC_PLUGIN, or through the default name libnccl-net.so (docs/packaging.md);
// an evaluator must not load it. A plugin other than Tally is left alone.
void removePlugin(const ParamSource& env, std::vector<EnvChange>* changes) {
  const std::optional<std::string> plugin = userValue(env, "NCCL_NET_PLUGIN");
  bool preloaded = false;
  if (const std::optional<std::string> preload = userValue(env, "LD_PRELOAD")) {
    // ld.so separates LD_PRELOAD entries with spaces or colons.
    std::vector<std::string> kept;
    size_t begin = 0;
    while (begin < preload->size()) {
      size_t end = preload->find_first_of(": ", begin);
      if (end == std::string::npos) end = preload->size();
      std::string entry = preload->substr(begin, end - begin);
      if (entry.find("nccl-net-tally") != std::string::npos) {
        preloaded = true;
      } else if (!entry.empty()) {
        kept.push_back(std::move(entry));
      }
      begin = end + 1;
    }
    if (preloaded && kept.empty()) {
      changes->push_back({EnvChange::Kind::kUnset, "LD_PRELOAD", *preload});
    } else if (preloaded) {
      changes->push_back({EnvChange::Kind::kSet, "LD_PRELOAD", join(kept, ":")});
    }
  }
  // Unset, NCCL opens libnccl-net.so, which an image may have linked to Tally (the opt-in in
  // docs/packaging.md): "none" keeps every external plugin out.
  if (!plugin || plugin->find("tally") != std::string::npos ||
      (preloaded && *plugin == "STATIC_PLUGIN")) {
    changes->push_back({EnvChange::Kind::kSet, "NCCL_NET_PLUGIN", "none"});
  }
}

}  // namespace

Status splitShellWords(const std::string& text, std::vector<std::string>* words) {
  words->clear();
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote == '\'') {
      if (c == '\'') {
        quote = 0;
      } else {
        word += c;
      }
    } else if (quote == '"') {
      if (c == '"') {
        quote = 0;
      } else if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '"' || text[i + 1] == '\\')) {
        word += text[++i];
      } else {
        word += c;
      }
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words->push_back(word);
      word.clear();
      in_word = false;
    } else {
      in_word = true;
      if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '\\') {
        if (i + 1 == text.size()) return Status::invalidUsage("ends with a backslash");
        word += text[++i];
      } else {
        word += c;
      }
    }
  }
  if (quote != 0) return Status::invalidUsage(std::string("has an unterminated ") + quote);
  if (in_word) words->push_back(word);
  return Status::ok();
}

namespace {

// Where the reducer listens, given the address its replica has in the spec. In a container of
// its own (Vertex AI's replicas, a JobSet's pods) every address at that port: the replica's host
// name may not resolve yet when the container starts (its DNS record can come after), and every
// address of the container is the replica's anyway. On a Slurm node, which is not the reducer's
// alone, the node's own address, which its name gives. An IPv6 address in the spec asks for
// every IPv6 address ("[::]"), anything else for every IPv4 one ("0.0.0.0").
Status reducerListenAddress(const ClusterSpec& spec, const std::string& address, std::string* out) {
  std::string host;
  uint16_t port = 0;
  Status st = splitHostPort(address, &host, &port);
  if (!st.isOk()) return Status::invalidUsage(spec.variable + ": " + st.message());
  if (spec.variable == "Slurm") {
    *out = address;
  } else {
    *out = joinHostPort(host.find(':') != std::string::npos ? "::" : "0.0.0.0", port);
  }
  return Status::ok();
}

// TALLY_REDUCER_ARGS, appended to the reducer's command line.
Status addReducerArgs(const ParamSource& env, std::vector<std::string>* argv) {
  const std::optional<std::string> text = env.get("TALLY_REDUCER_ARGS");
  if (!text) return Status::ok();
  std::vector<std::string> words;
  Status st = splitShellWords(*text, &words);
  if (!st.isOk()) return Status::invalidUsage("TALLY_REDUCER_ARGS " + st.message());
  for (const std::string& w : words) {
    if (w == "--listen" || w.rfind("--listen=", 0) == 0) {
      return Status::invalidUsage(
          "TALLY_REDUCER_ARGS must not set --listen: tally launch sets it from the reducer's "
          "address in the cluster spec");
    }
  }
  argv->insert(argv->end(), words.begin(), words.end());
  return Status::ok();
}

}  // namespace

Status planLaunch(const ClusterEnv& cluster, const ParamSource& env, const std::string& plugin_path,
                  const std::string& reducer_path, const std::vector<std::string>& command,
                  LaunchPlan* out) {
  LaunchPlan plan;
  const ClusterSpec* spec = cluster.primary();
  if (spec == nullptr) {
    if (command.empty()) return missingCommand("");
    plan.summary =
        "no CLUSTER_SPEC or TF_CONFIG, JobSet or Slurm heterogeneous job: running the command "
        "unchanged";
    plan.argv = command;
    *out = std::move(plan);
    return Status::ok();
  }

  plan.has_spec = true;
  plan.role = spec->role();
  const std::string role = clusterRoleName(plan.role);
  switch (plan.role) {
    case ClusterRole::kPrimary:
    case ClusterRole::kWorker:
      if (command.empty()) return missingCommand(role);
      TALLY_RETURN_IF_ERROR(planCollNetRank(cluster, *spec, env, plugin_path, &plan));
      plan.argv = command;
      break;
    case ClusterRole::kReducer: {
      const std::string address = spec->ownAddress();
      if (address.empty()) {
        return Status::invalidUsage(spec->variable + ": no address for " + spec->task_type +
                                    " index " + std::to_string(spec->index));
      }
      // The summary names the address the workers reach this reducer at; it listens on
      // `listen`, which holds that address.
      std::string listen;
      TALLY_RETURN_IF_ERROR(reducerListenAddress(*spec, address, &listen));
      plan.summary = role + " " + describeTask(*spec) + ", tally-reducer on " + address +
                     (listen == address ? "" : ", listening on " + listen);
      plan.argv = {reducer_path, "--listen", listen};
      TALLY_RETURN_IF_ERROR(addReducerArgs(env, &plan.argv));
      if (!command.empty()) {
        plan.notes.push_back("WARNING: this replica is a reducer: the command (" +
                             joinWords(command) + ") is not run");
      }
      break;
    }
    case ClusterRole::kEvaluator:
      if (command.empty()) return missingCommand(role);
      plan.summary = role + " " + describeTask(*spec) +
                     ", not a CollNet rank: the command runs without the plugin";
      removePlugin(env, &plan.env);
      plan.argv = command;
      break;
  }
  *out = std::move(plan);
  return Status::ok();
}

Status planLaunchFromEnvironment(const ParamSource& env, const std::string& plugin_path,
                                 const std::string& reducer_path,
                                 const std::vector<std::string>& command, LaunchPlan* out) {
  ClusterEnv cluster;
  std::vector<std::string> notes;
  TALLY_RETURN_IF_ERROR(loadJobCluster(env, &cluster, &notes));
  LaunchPlan plan;
  TALLY_RETURN_IF_ERROR(planLaunch(cluster, env, plugin_path, reducer_path, command, &plan));
  plan.notes.insert(plan.notes.end(), notes.begin(), notes.end());
  *out = std::move(plan);
  return Status::ok();
}

std::string shellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string shellWord(const std::string& text) {
  if (text.empty()) return "''";
  // '=' is plain here because every word is written after `exec`, never as the command name,
  // where NAME=value would be an assignment.
  for (char c : text) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       std::string_view("_-+./:,@%=").find(c) != std::string_view::npos;
    if (!plain) return shellQuote(text);
  }
  return text;
}

std::string dryRunText(const LaunchPlan& plan) {
  std::string text = comment("tally launch: " + plan.summary);
  for (const EnvChange& change : plan.env) {
    switch (change.kind) {
      case EnvChange::Kind::kSet:
        text += "export " + change.name + "=" + shellQuote(change.value) + "\n";
        break;
      case EnvChange::Kind::kKept:
        text += comment("kept " + change.name + "=" + shellQuote(change.value) +
                        ", set by the environment");
        break;
      case EnvChange::Kind::kUnset:
        text += comment(change.name + " was " + shellQuote(change.value)) + "unset " + change.name +
                "\n";
        break;
    }
  }
  for (const std::string& note : plan.notes) text += comment(note);
  text += "exec " + joinWords(plan.argv) + "\n";
  return text;
}

std::vector<std::string> reportLines(const LaunchPlan& plan) {
  std::vector<std::string> lines = {plan.summary};
  for (const EnvChange& change : plan.env) {
    switch (change.kind) {
      case EnvChange::Kind::kSet:
        lines.push_back("set " + change.name + "=" + change.value);
        break;
      case EnvChange::Kind::kKept:
        lines.push_back("kept " + change.name + "=" + change.value + ", set by the environment");
        break;
      case EnvChange::Kind::kUnset:
        lines.push_back("unset " + change.name + " (was " + change.value + ")");
        break;
    }
  }
  lines.insert(lines.end(), plan.notes.begin(), plan.notes.end());
  lines.push_back("exec " + joinWords(plan.argv));
  return lines;
}

}  // namespace tally::commands
