// SPDX-License-Identifier: Apache-2.0
// --fault, --duration and --slow-factor: the grammar of a fault list, the names the timeline
// prints, and the checks that need the other flags (reducer count, duration, algorithms,
// --emulate).
#include <algorithm>
#include <cctype>

#include "common/sizes.h"
#include "common/strings.h"
#include "tools/bench/bench.h"
#include "tools/bench/bench_internal.h"
#include "tools/bench/link_rate.h"

namespace tally::bench {
namespace {

constexpr int64_t kAfterLastFaultMs = 10000;
constexpr int64_t kShortestDefaultMs = 20000;

struct EventName {
  const char* name;
  FaultKind kind;
};
// "restart" is the short form of restart-reducer; faultName() always writes the long one.
constexpr EventName kEvents[] = {
    {"kill-reducer", FaultKind::kKill}, {"stop-reducer", FaultKind::kStop},
    {"cont-reducer", FaultKind::kCont}, {"restart-reducer", FaultKind::kRestart},
    {"restart", FaultKind::kRestart},   {"slow-reducer", FaultKind::kSlow},
    {"heal-reducer", FaultKind::kHeal}};

// The length of the number at the start of `text` (digits with at most one dot inside), or 0 when
// it does not start with one or it runs past 12 characters.
size_t numberPrefix(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  const std::string number = text.substr(0, i);
  const size_t dot = number.find('.');
  const bool well_formed = !number.empty() && number.front() != '.' && number.back() != '.' &&
                           (dot == std::string::npos || number.find('.', dot + 1) == number.npos);
  return well_formed && number.size() <= 12 ? i : 0;
}

Status badItem(const std::string& item, const std::string& why) {
  return Status::invalidUsage("--fault: \"" + item + "\": " + why);
}

// One item without its context: EVENT[:REDUCER]@TIME. reducer is -1 when no index was written.
Status parseItem(const std::string& item, Fault* out) {
  const size_t at = item.find('@');
  if (at == std::string::npos) return badItem(item, "no time (want EVENT[:REDUCER]@TIME)");
  if (item.find('@', at + 1) != std::string::npos) return badItem(item, "more than one '@'");
  const std::string head = item.substr(0, at), time = item.substr(at + 1);
  const size_t colon = head.find(':');
  const std::string event = head.substr(0, colon);
  Fault f;
  f.given = item;
  bool known = false;
  for (const EventName& e : kEvents) {
    if (event == e.name) f.kind = e.kind, known = true;
  }
  if (!known) {
    return badItem(item, "unknown event \"" + event +
                             "\" (want kill-reducer, stop-reducer, cont-reducer, "
                             "restart-reducer, restart, slow-reducer or heal-reducer)");
  }
  f.reducer = -1;
  if (colon != std::string::npos) {
    const std::string index = head.substr(colon + 1);
    // Digits only: no sign, no spaces, and short enough that stoi cannot overflow.
    if (index.empty() || index.size() > 4 ||
        !std::all_of(index.begin(), index.end(), [](unsigned char c) { return std::isdigit(c); }))
      return badItem(item, "reducer \"" + index + "\" is not an index such as 0 or 3");
    f.reducer = std::stoi(index);
  }
  Status s = parseFaultTime(time, &f.at_ms);
  if (!s.isOk()) return badItem(item, s.message());
  *out = std::move(f);
  return Status::ok();
}

}  // namespace

const char* faultEventName(FaultKind kind) {
  for (const EventName& e : kEvents) {
    if (e.kind == kind) return e.name;  // restart-reducer comes before restart
  }
  return "?";
}

std::string timeText(int64_t ms) {
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + "s" : std::to_string(ms) + "ms";
}

std::string faultName(const Fault& f) {
  return std::string(faultEventName(f.kind)) + ":" + std::to_string(f.reducer) + "@" +
         timeText(f.at_ms);
}

Status parseFaultTime(const std::string& text, int64_t* ms) {
  return parseDurationMs(text, DurationUnit::kNone, ms);
}

Status parseSlowFactor(const std::string& text, double* factor) {
  const size_t n = numberPrefix(text);
  const double value = n > 0 && n == text.size() ? std::stod(text) : 0;
  if (!(value > 1)) {
    return Status::invalidUsage(
        "--slow-factor: expected a number above 1 such as 10 or 2.5, got \"" + text + "\"");
  }
  *factor = value;
  return Status::ok();
}

Status parseFaults(const std::string& text, std::vector<Fault>* out) {
  std::vector<Fault> faults;
  for (const std::string& raw : split(text, ',')) {
    const std::string item = trim(raw);
    if (item.empty()) return Status::invalidUsage("--fault: an empty item in \"" + text + "\"");
    Fault f;
    TALLY_RETURN_IF_ERROR(parseItem(item, &f));
    faults.push_back(std::move(f));
  }
  std::stable_sort(faults.begin(), faults.end(),
                   [](const Fault& a, const Fault& b) { return a.at_ms < b.at_ms; });
  // Each reducer's state and its link's along the list, so that every event finds them able to
  // take it.
  enum class State { kRunning, kStopped, kDead };
  std::vector<State> state;
  std::vector<bool> slowed;  // each reducer's link, apart from its process
  int last_killed = -1;
  for (Fault& f : faults) {
    if (f.reducer < 0 && f.kind == FaultKind::kRestart) {
      if (last_killed < 0) return badItem(f.given, "no reducer was killed before it");
      f.reducer = last_killed;
    }
    if (f.reducer < 0) f.reducer = 0;
    if (state.size() <= static_cast<size_t>(f.reducer)) {
      state.resize(static_cast<size_t>(f.reducer) + 1, State::kRunning);
      slowed.resize(state.size(), false);
    }
    const size_t i = static_cast<size_t>(f.reducer);
    State& st = state[i];
    const std::string r = "reducer " + std::to_string(f.reducer);
    switch (f.kind) {
      case FaultKind::kKill:
        if (st == State::kDead) return badItem(f.given, r + " is already dead");
        st = State::kDead;
        last_killed = f.reducer;
        break;
      case FaultKind::kStop:
        if (st != State::kRunning) return badItem(f.given, r + " is not running");
        st = State::kStopped;
        break;
      case FaultKind::kCont:
        if (st != State::kStopped) return badItem(f.given, r + " is not stopped");
        st = State::kRunning;
        break;
      case FaultKind::kRestart:
        if (st != State::kDead) return badItem(f.given, r + " was not killed before it");
        st = State::kRunning;
        break;
      case FaultKind::kSlow:
        if (slowed[i]) return badItem(f.given, r + "'s link is already slowed");
        slowed[i] = true;
        break;
      case FaultKind::kHeal:
        if (!slowed[i]) return badItem(f.given, r + "'s link is not slowed");
        slowed[i] = false;
        break;
    }
  }
  if (faults.empty()) return Status::invalidUsage("--fault: no fault named");
  *out = std::move(faults);
  return Status::ok();
}

int64_t defaultFaultDuration(const std::vector<Fault>& faults) {
  const int64_t last = faults.empty() ? 0 : faults.back().at_ms;
  return std::max(last + kAfterLastFaultMs, kShortestDefaultMs);
}

Status validateFaultOptions(const BenchOptions& o) {
  if (std::count(o.algos.begin(), o.algos.end(), Algo::kServer) == 0)
    return Status::invalidUsage("--fault needs the reduction server: --algo must include rs");
  if (o.sizes.empty() || o.types.empty() || o.ops.empty())
    return Status::invalidUsage("nothing to run");
  if (o.duration_ms < 0) return Status::invalidUsage("--duration must be positive");
  const int64_t duration = o.duration_ms > 0 ? o.duration_ms : defaultFaultDuration(o.faults);
  if (duration >= o.timeout_ms) {
    return Status::invalidUsage("--duration " + timeText(duration) + " is not below --timeout " +
                                timeText(o.timeout_ms));
  }
  if (!(o.slow_factor > 1)) return Status::invalidUsage("--slow-factor must be above 1");
  for (const Fault& f : o.faults) {
    if ((f.kind == FaultKind::kSlow || f.kind == FaultKind::kHeal) && o.emulate.empty()) {
      return badItem(f.given,
                     "needs --emulate RATE (it changes the rate of the reducer's emulated link)");
    }
    if (f.reducer >= o.reducers) {
      return badItem(f.given, "there is no reducer " + std::to_string(f.reducer) + " (--reducers " +
                                  std::to_string(o.reducers) + ")");
    }
    if (f.at_ms >= duration) {
      return badItem(f.given,
                     "at or after the end of the run (--duration " + timeText(duration) + ")");
    }
  }
  return Status::ok();
}

std::string faultRate(const BenchOptions& o, const Fault& f) {
  if (f.kind == FaultKind::kSlow) return dividedRate(o.emulate, o.slow_factor);
  if (f.kind == FaultKind::kHeal) return o.emulate;
  return "";
}

BenchOptions faultRunOptions(const BenchOptions& given) {
  BenchOptions o = given;
  o.algos = {Algo::kServer};
  o.types = {given.types.front()};
  o.ops = {given.ops.front()};
  const std::vector<uint64_t> sizes = typeSizes(o, o.types.front());
  o.sizes = {*std::max_element(sizes.begin(), sizes.end())};
  if (o.duration_ms == 0) o.duration_ms = defaultFaultDuration(o.faults);
  return o;
}

}  // namespace tally::bench
