// SPDX-License-Identifier: Apache-2.0
// Which values of the TALLY_ variables Tally refuses, written once: the plugin refuses them at
// start-up (Params::validate), tally-reducer at its start, and `tally env` and `tally doctor`
// report them (findParamProblems), with the TALLY_ names that are no variable.
#include <algorithm>
#include <map>
#include <string_view>

#include "common/auth.h"
#include "common/cluster.h"
#include "common/params.h"
#include "common/strings.h"
#include "common/suggest.h"

namespace tally {
namespace {

// The problem with a list of reducer addresses (TALLY_REDUCERS, TALLY_SPARE_REDUCERS): the first
// address that is not host:port, or too many of them; empty when the list is usable. Blank items
// are skipped, as resolveReducers skips them.
std::string addressListProblem(const std::string& text) {
  const std::vector<std::string> addresses = splitList(text);
  for (const std::string& address : addresses) {
    const Status st = checkPeerAddress(address);
    if (!st.isOk()) return st.message();
  }
  if (addresses.size() > static_cast<size_t>(kMaxReducerAddresses)) {
    return "lists " + std::to_string(addresses.size()) + " addresses, at most " +
           std::to_string(kMaxReducerAddresses);
  }
  return "";
}

}  // namespace

std::string ParamProblem::toString() const {
  if (unknown_name) {
    return name + " is not a Tally variable" +
           (nearest.empty() ? std::string() : "; did you mean " + nearest + "?");
  }
  return name + "=" + value + " is not valid: " + reason;
}

std::vector<ParamProblem> Params::problems() const {
  std::vector<ParamProblem> out;
  auto range = [&out](const char* name, int64_t value, int64_t lo, int64_t hi) {
    if (value >= lo && value <= hi) return;
    out.push_back({name, std::to_string(value),
                   hi == INT64_MAX
                       ? "expected at least " + std::to_string(lo)
                       : "expected " + std::to_string(lo) + " to " + std::to_string(hi)});
  };
  auto oneOf = [&out](const char* name, const std::string& value,
                      std::initializer_list<const char*> allowed) {
    std::string list;
    for (const char* a : allowed) {
      if (trim(value) == a) return;
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    out.push_back({name, value, "expected one of " + list});
  };
  auto addresses = [&out](const char* name, const std::string& value) {
    std::string why = addressListProblem(value);
    if (!why.empty()) out.push_back({name, value, std::move(why)});
  };
  // In registry order, so messages come out in the order of docs/env.md.
  range("TALLY_SOCKET_NSOCKS", socketNsocks, 1, kMaxSocketNsocks);
  oneOf("TALLY_TRANSPORT", transport, {"auto", "tcp", "ofi", "verbs"});
  range("TALLY_IB_QPS_PER_CONNECTION", ibQpsPerConnection, 1, kMaxIbQpsPerConnection);
  addresses("TALLY_REDUCERS", reducers);
  range("TALLY_SLICE_BYTES", static_cast<int64_t>(std::min<uint64_t>(sliceBytes, INT64_MAX)), 1,
        kMaxSliceBytesParam);
  range("TALLY_SLICES_PER_REDUCER", slicesPerReducer, 0, kMaxSlicesPerReducerParam);
  range("TALLY_MIN_SLICE_BYTES", static_cast<int64_t>(std::min<uint64_t>(minSliceBytes, INT64_MAX)),
        0, kMaxSliceBytesParam);
  range("TALLY_LINK_MBPS", linkMbps, 0, kMaxLinkMbps);
  range("TALLY_LINK_LATENCY_US", linkLatencyUs, 0, kMaxLinkLatencyUs);
  range("TALLY_COLL_WINDOW", collWindow, 1, kMaxCollWindow);
  oneOf("TALLY_COLL_PROGRESS", collProgress, {"thread", "poll", "legacy"});
  oneOf("TALLY_ZEROCOPY", zerocopy, {"off", "on", "always"});
  range("TALLY_COLL_MAX_REQUESTS", collMaxRequests, 1, kMaxCollMaxRequests);
  range("TALLY_REDUCER_TIMEOUT_MS", reducerTimeout, 0, kMaxReducerTimeoutMs);
  range("TALLY_MIN_REDUCERS", minReducers, 1, kMaxMinReducers);
  if (slowReducerFactor != 0 &&
      (slowReducerFactor < 2 || slowReducerFactor > kMaxSlowReducerFactor)) {
    out.push_back({"TALLY_SLOW_REDUCER_FACTOR", std::to_string(slowReducerFactor),
                   "expected 0 (off) or 2 to " + std::to_string(kMaxSlowReducerFactor)});
  }
  addresses("TALLY_SPARE_REDUCERS", spareReducers);
  // The job token as loadJobToken reads it at connect (common/auth.h); the secret is never shown.
  if (!jobToken.empty() && trim(jobToken).empty()) {
    out.push_back({"TALLY_JOB_TOKEN", "(blank)", "expected the job secret, or unset for none"});
  }
  if (!jobTokenFile.empty()) {
    if (!jobToken.empty()) {
      out.push_back({"TALLY_JOB_TOKEN_FILE", jobTokenFile,
                     "TALLY_JOB_TOKEN is set too; set only one of the two"});
    } else if (Status st = auth::checkJobTokenFile(jobTokenFile); !st.isOk()) {
      out.push_back({"TALLY_JOB_TOKEN_FILE", jobTokenFile, st.message()});
    }
  }
  return out;
}

Status Params::validate() const {
  const std::vector<ParamProblem> found = problems();
  return found.empty() ? Status::ok() : Status::invalidUsage(found.front().toString());
}

std::vector<ParamProblem> findParamProblems(const ParamSource& source) {
  // Each variable is parsed alone, so one bad value does not hide the next; a variable that does
  // not parse keeps its default, which problems() accepts, and so is reported once.
  std::vector<ParamProblem> unparsed;
  const Params p = Params::loadEach(source, &unparsed);
  std::map<std::string, ParamProblem> by_name;
  for (ParamProblem& problem : unparsed) by_name[problem.name] = std::move(problem);
  for (ParamProblem& problem : p.problems()) by_name[problem.name] = std::move(problem);
  std::vector<ParamProblem> out;
  for (const ParamInfo& info : paramRegistry()) {
    auto it = by_name.find(info.name);
    if (it != by_name.end()) out.push_back(std::move(it->second));
  }
  out.insert(out.end(), p.unknown_names.begin(), p.unknown_names.end());
  return out;
}

std::vector<ParamProblem> findUnknownParamNames(const ParamSource& source) {
  constexpr std::string_view kPrefix = "TALLY_";
  // Typos are looked for in what follows the prefix, which every candidate shares: compared
  // whole, a long name would be allowed more edits than its own part can take.
  std::vector<std::string> known;
  for (const ParamInfo& info : paramRegistry()) {
    const std::string_view name(info.name);
    if (name.substr(0, kPrefix.size()) == kPrefix) known.emplace_back(name.substr(kPrefix.size()));
  }
  for (std::string_view name : kLaunchInputVariables) {
    known.emplace_back(name.substr(kPrefix.size()));
  }
  std::vector<std::string> names = source.names();
  std::sort(names.begin(), names.end());
  std::vector<ParamProblem> out;
  for (const std::string& name : names) {
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = name.substr(kPrefix.size());
    if (std::find(known.begin(), known.end(), rest) != known.end()) continue;
    ParamProblem problem;
    problem.name = name;
    problem.unknown_name = true;
    const std::string nearest = nearestName(rest, known);
    if (!nearest.empty()) problem.nearest = std::string(kPrefix) + nearest;
    out.push_back(std::move(problem));
  }
  return out;
}

}  // namespace tally
