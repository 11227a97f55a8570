// SPDX-License-Identifier: Apache-2.0
#include "common/params.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string_view>

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

std::vector<std::string> EnvParamSource::names() const {
  std::vector<std::string> out;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    out.emplace_back(text.substr(0, text.find('=')));
  }
  return out;
}

std::optional<std::string> MapParamSource::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> MapParamSource::names() const {
  std::vector<std::string> out;
  for (const auto& [name, value] : values_) out.push_back(name);
  return out;
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

Status parseBool(const std::string& text, bool* out) {
  const std::string s = toLower(trim(text));
  if (s == "1" || s == "true" || s == "yes" || s == "on") { *out = true; return Status::ok(); }
  if (s == "0" || s == "false" || s == "no" || s == "off") { *out = false; return Status::ok(); }
  return Status::invalidUsage("expected 0 or 1, got '" + text + "'");
}

namespace {

Status parseInto(const std::string& text, std::string* out) { *out = text; return Status::ok(); }
Status parseInto(const std::string& text, int64_t* out, ParamType type) {
  // Every kMillis variable's name ends in _MS: a bare number is milliseconds, as its name says.
  return type == ParamType::kMillis ? parseDurationMs(text, DurationUnit::kMilliseconds, out)
                                    : parseInt(text, out);
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
  p.unknown_names = findUnknownParamNames(source);
  *out = std::move(p);
  return Status::ok();
}

Params Params::loadEach(const ParamSource& source, std::vector<ParamProblem>* unparsed) {
  Params p = defaults();
#define TALLY_PARAM_LOAD_EACH(type, member, name, def, doc)                        \
  {                                                                                \
    std::optional<std::string> value = source.get(name);                           \
    if (value) {                                                                   \
      decltype(p.member) parsed{};                                                 \
      Status st = parseTyped(*value, &parsed, ParamType::type);                    \
      if (st) {                                                                    \
        p.member = parsed;                                                         \
        p.set_by_source.emplace_back(name, *value);                                \
      } else if (unparsed != nullptr) {                                            \
        unparsed->push_back(ParamProblem{name, "'" + *value + "'", st.message()}); \
      }                                                                            \
    }                                                                              \
  }
  TALLY_PARAM_LIST(TALLY_PARAM_LOAD_EACH)
#undef TALLY_PARAM_LOAD_EACH
  p.unknown_names = findUnknownParamNames(source);
  return p;
}

Params Params::defaults() {
  Params p;
  Status st = load(MapParamSource(), &p);
  if (!st) std::abort();  // a default in TALLY_PARAM_LIST does not parse: a build defect
  return p;
}

bool isSecretParam(const std::string& name) { return name == "TALLY_JOB_TOKEN"; }

void Params::logProvenance() const {
  for (const auto& [name, value] : set_by_source) {
    TALLY_INFO(log::kEnv, "%s set by environment to %s", name.c_str(),
               isSecretParam(name) ? "(secret, not shown)" : value.c_str());
  }
  for (const ParamProblem& unknown : unknown_names) {
    TALLY_WARN("%s (ignored)", unknown.toString().c_str());
  }
}

std::string paramsMarkdown() {
  std::string out =
      "# Environment variables\n\n"
      "Generated from `common/params.h` by `tally env --markdown`; a test keeps this file "
      "equal to it.\n\n"
      "Durations follow one rule, here and in every `tally` command: a variable or flag whose "
      "name carries its unit reads a bare number in that unit (`TALLY_TIMEOUT_MS=30000` is 30 "
      "s, `TALLY_LINK_LATENCY_US=50` is 50 us), and the `_MS` variables also take a duration "
      "with a unit (`500ms`, `30s`, `2m`, `1h`). One whose name carries no unit, such as the "
      "`--timeout` of `tally doctor` and `tally bench`, refuses a bare number: write `5s` or "
      "`500ms`.\n\n"
      "`tally env` lists every variable with its value, then checks the environment by the "
      "rules the plugin applies at start-up: each value the plugin would refuse "
      "(`TALLY_COLL_WINDOW=100000`, `TALLY_REDUCERS` with an address without its port, a "
      "`TALLY_JOB_TOKEN_FILE` that cannot be read) and each `TALLY_` name that is no variable "
      "(`TALLY_REDUCER`, with the variable it likely meant) is a line `tally env: ...` on "
      "stderr naming the variable, and the exit status is 1. On a refused value the plugin's "
      "init fails and `tally-reducer` exits 2; of an unknown name both only warn. `tally "
      "doctor` reports the same list. The variables a scheduler's job sets for `tally launch` "
      "(`TALLY_JOBSET_*`, `TALLY_SLURM_HET_GROUP`, [launch.md](launch.md)) are known "
      "names.\n\n"
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
