#include "common/params.h"

#include <climits>
#include <cstdlib>

#include "common/log.h"
#include "common/sizes.h"
#include "common/strings.h"

namespace tally {

const std::vector<ParamInfo>& paramRegistry() {
  static const std::vector<ParamInfo> registry = {
#define TALLY_PARAM_INFO(type, member, name, def, doc) {ParamType::type, name, def, doc},
      TALLY_PARAM_LIST(TALLY_PARAM_INFO)
#undef TALLY_PARAM_INFO
  };
  return registry;
}

std::optional<std::string> EnvParamSource::get(const std::string& name) const {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::optional<std::string> MapParamSource::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

Status parseInt(const std::string& text, int64_t* out) {
  std::string t = trim(text);
  bool negative = !t.empty() && t[0] == '-';
  uint64_t v = 0;
  std::string suffix;
  TALLY_RETURN_IF_ERROR(splitNumber(negative ? t.substr(1) : t, &v, &suffix));
  if (!suffix.empty()) return Status::invalidUsage("expected an integer, got '" + text + "'");
  if (v > static_cast<uint64_t>(INT64_MAX)) {
    return Status::invalidUsage("integer out of range: '" + text + "'");
  }
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return Status::ok();
}

Status parseMillis(const std::string& text, int64_t* out) {
  uint64_t v = 0;
  std::string suffix;
  TALLY_RETURN_IF_ERROR(splitNumber(text, &v, &suffix));
  uint64_t unit = 0;
  if (suffix.empty() || suffix == "ms") unit = 1;
  else if (suffix == "s") unit = 1000;
  else if (suffix == "m" || suffix == "min") unit = 60000;
  else if (suffix == "h") unit = 3600000;
  else return Status::invalidUsage("expected a duration such as 500ms, 30s or 2m, got '" + text + "'");
  if (v > static_cast<uint64_t>(INT64_MAX) / unit) {
    return Status::invalidUsage("duration out of range: '" + text + "'");
  }
  *out = static_cast<int64_t>(v * unit);
  return Status::ok();
}

Status parseBool(const std::string& text, bool* out) {
  const std::string s = toLower(trim(text));
  if (s == "1" || s == "true" || s == "yes" || s == "on") { *out = true; return Status::ok(); }
  if (s == "0" || s == "false" || s == "no" || s == "off") { *out = false; return Status::ok(); }
  return Status::invalidUsage("expected 0 or 1, got '" + text + "'");
}

namespace {

Status parseInto(const std::string& text, std::string* out) { *out = text; return Status::ok(); }
Status parseInto(const std::string& text, int64_t* out, ParamType type) {
  return type == ParamType::kMillis ? parseMillis(text, out) : parseInt(text, out);
}
Status parseInto(const std::string& text, uint64_t* out) { return parseBytes(text, out); }
Status parseInto(const std::string& text, bool* out) { return parseBool(text, out); }

template <typename T>
Status parseTyped(const std::string& text, T* out, ParamType type) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return parseInto(text, out, type);
  } else {
    (void)type;
    return parseInto(text, out);
  }
}

}  // namespace

Status Params::load(const ParamSource& source, Params* out) {
  Params p;
#define TALLY_PARAM_LOAD(type, member, name, def, doc)                                     \
  {                                                                                        \
    std::optional<std::string> value = source.get(name);                                   \
    Status st = parseTyped(value ? *value : std::string(def), &p.member, ParamType::type); \
    if (!st) {                                                                             \
      return Status::invalidUsage(std::string(name) + "='" + (value ? *value : def) +      \
                                  "' is not valid: " + st.message());                      \
    }                                                                                      \
    if (value) p.set_by_source.emplace_back(name, *value);                                            \
  }
  TALLY_PARAM_LIST(TALLY_PARAM_LOAD)
#undef TALLY_PARAM_LOAD
  *out = std::move(p);
  return Status::ok();
}

Params Params::defaults() {
  Params p;
  Status st = load(MapParamSource(), &p);
  if (!st) std::abort();  // a default in TALLY_PARAM_LIST does not parse: a build defect
  return p;
}

bool isSecretParam(const std::string& name) { return name == "TALLY_JOB_TOKEN"; }

std::string ParamProblem::toString() const {
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
  // In registry order, so messages come out in the order of docs/env.md.
  range("TALLY_SOCKET_NSOCKS", socketNsocks, 1, kMaxSocketNsocks);
  oneOf("TALLY_TRANSPORT", transport, {"auto", "tcp", "ofi", "verbs"});
  range("TALLY_IB_QPS_PER_CONNECTION", ibQpsPerConnection, 1, kMaxIbQpsPerConnection);
  range("TALLY_LINK_MBPS", linkMbps, 0, kMaxLinkMbps);
  range("TALLY_LINK_LATENCY_US", linkLatencyUs, 0, kMaxLinkLatencyUs);
  range("TALLY_COLL_WINDOW", collWindow, 1, INT64_MAX);
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
  return out;
}

Status Params::validate() const {
  const std::vector<ParamProblem> found = problems();
  return found.empty() ? Status::ok() : Status::invalidUsage(found.front().toString());
}

std::vector<ParamProblem> findParamProblems(const ParamSource& source) {
  // Each variable is parsed alone, so one bad value does not hide the next; a variable that does
  // not parse keeps its default, which problems() accepts, and so is reported once.
  std::map<std::string, ParamProblem> by_name;
  Params p = Params::defaults();
#define TALLY_PARAM_CHECK(type, member, name, def, doc)                       \
  {                                                                           \
    std::optional<std::string> value = source.get(name);                      \
    if (value) {                                                              \
      decltype(p.member) parsed{};                                            \
      Status st = parseTyped(*value, &parsed, ParamType::type);               \
      if (st)                                                                 \
        p.member = parsed;                                                    \
      else                                                                    \
        by_name[name] = ParamProblem{name, "'" + *value + "'", st.message()}; \
    }                                                                         \
  }
  TALLY_PARAM_LIST(TALLY_PARAM_CHECK)
#undef TALLY_PARAM_CHECK
  for (ParamProblem& problem : p.problems()) by_name[problem.name] = std::move(problem);
  std::vector<ParamProblem> out;
  for (const ParamInfo& info : paramRegistry()) {
    auto it = by_name.find(info.name);
    if (it != by_name.end()) out.push_back(std::move(it->second));
  }
  return out;
}

void Params::logProvenance() const {
  for (const auto& [name, value] : set_by_source) {
    TALLY_INFO(log::kEnv, "%s set by environment to %s", name.c_str(),
               isSecretParam(name) ? "(secret, not shown)" : value.c_str());
  }
}

std::string paramsMarkdown() {
  std::string out =
      "# Environment variables\n\n"
      "Generated from `common/params.h` by `tally env --markdown`; a test keeps this file "
      "equal to it.\n\n"
      "| variable | default | meaning |\n|---|---|---|\n";
  for (const ParamInfo& p : paramRegistry()) {
    out += "| `";
    out += p.name;
    out += "` | ";
    out += p.default_value[0] ? std::string("`") + p.default_value + "`" : std::string("(empty)");
    out += " | ";
    out += p.doc;
    out += " |\n";
  }
  return out;
}

}  // namespace tally
