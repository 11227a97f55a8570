#include "common/params.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include "common/log.h"

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

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Splits "64K" into 64 and "K". Fails on a missing number or an out-of-range value.
Status splitNumber(const std::string& text, uint64_t* number, std::string* suffix) {
  std::string t = trim(text);
  if (t.empty() || !std::isdigit(static_cast<unsigned char>(t[0]))) {
    return Status::invalidUsage("expected a non-negative number, got '" + text + "'");
  }
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(t.c_str(), &end, 10);
  if (errno == ERANGE) return Status::invalidUsage("number out of range: '" + text + "'");
  *number = v;
  *suffix = trim(std::string(end));
  return Status::ok();
}

Status multiply(uint64_t v, uint64_t unit, const std::string& text, uint64_t* out) {
  if (unit != 0 && v > UINT64_MAX / unit) {
    return Status::invalidUsage("value out of range: '" + text + "'");
  }
  *out = v * unit;
  return Status::ok();
}

}  // namespace

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

std::string formatBytes(uint64_t bytes) {
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

Status parseBytes(const std::string& text, uint64_t* out) {
  uint64_t v = 0;
  std::string suffix;
  TALLY_RETURN_IF_ERROR(splitNumber(text, &v, &suffix));
  std::string s;
  for (char c : suffix) s += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  uint64_t unit = 0;
  if (s.empty() || s == "B") unit = 1;
  else if (s == "K" || s == "KB" || s == "KIB") unit = 1ull << 10;
  else if (s == "M" || s == "MB" || s == "MIB") unit = 1ull << 20;
  else if (s == "G" || s == "GB" || s == "GIB") unit = 1ull << 30;
  else if (s == "T" || s == "TB" || s == "TIB") unit = 1ull << 40;
  else return Status::invalidUsage("expected a size such as 4096, 64K, 4M or 1G, got '" + text + "'");
  return multiply(v, unit, text, out);
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
  uint64_t ms = 0;
  TALLY_RETURN_IF_ERROR(multiply(v, unit, text, &ms));
  if (ms > static_cast<uint64_t>(INT64_MAX)) return Status::invalidUsage("duration out of range: '" + text + "'");
  *out = static_cast<int64_t>(ms);
  return Status::ok();
}

Status parseBool(const std::string& text, bool* out) {
  std::string s;
  for (char c : trim(text)) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
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
  range("TALLY_COLL_WINDOW", collWindow, 1, INT64_MAX);
  oneOf("TALLY_COLL_PROGRESS", collProgress, {"thread", "poll", "legacy"});
  range("TALLY_COLL_MAX_REQUESTS", collMaxRequests, 1, kMaxCollMaxRequests);
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
