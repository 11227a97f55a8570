// The `tally` command: `tally bench` (all-reduce bandwidth of the reduction server beside a ring
// and Gloo, tools/bench/), `tally demo` (a preset of the bench), `tally env` (every TALLY_
// variable; --markdown prints docs/env.md), and the cluster commands `tally launch`, `tally plan`
// and `tally doctor` (tools/commands/). A bad command line exits 2 (`tally doctor`'s exits 3, as
// docs/doctor.md says); an unknown command names the nearest one. `--version` prints
// "tally VERSION".
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/params.h"
#include "common/suggest.h"
#include "common/version.h"
#include "tools/bench/bench_command.h"
#include "tools/commands/command.h"
#include "tools/demo.h"

namespace {

// Every variable with its value and where it came from; then, on stderr, each value set in the
// environment that the plugin would refuse at start-up, with why, and each TALLY_ name that is no
// variable, with the nearest one (findParamProblems); exit status 1 when there is any.
int runEnv(bool markdown) {
  if (markdown) {
    std::fputs(tally::paramsMarkdown().c_str(), stdout);
    return 0;
  }
  tally::EnvParamSource env;
  for (const auto& p : tally::paramRegistry()) {
    auto value = env.get(p.name);
    if (value && tally::isSecretParam(p.name)) value = "(secret)";
    std::printf("%-26s %-12s %s\n", p.name, value ? value->c_str() : p.default_value,
                value ? "(environment)" : "(default)");
  }
  const std::vector<tally::ParamProblem> problems = tally::findParamProblems(env);
  for (const tally::ParamProblem& problem : problems) {
    std::fprintf(stderr, "tally env: %s\n", problem.toString().c_str());
  }
  return problems.empty() ? 0 : 1;
}

// The first word that is not an option, when it names no command: the message, with the nearest
// command and the list, and true. CLI11 alone would say only "A subcommand is required".
bool reportUnknownCommand(CLI::App& app, int argc, char** argv) {
  std::string word;
  for (int i = 1; i < argc && word.empty(); ++i) {
    if (argv[i][0] != '-') word = argv[i];
  }
  if (word.empty()) return false;
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->check_name(word)) return false;
    names.push_back(sub->get_name());
  }
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  const std::string nearest = tally::nearestName(word, names);
  std::fprintf(stderr, "tally: unknown command '%s'", word.c_str());
  if (!nearest.empty()) std::fprintf(stderr, "; did you mean '%s'?", nearest.c_str());
  std::fprintf(stderr, "\ncommands: %s\nRun 'tally --help' for what each does.\n", list.c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tally: NCCL reduction server tools"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tally ") + tally::versionString());

  bool markdown = false;
  CLI::App* env_cmd = app.add_subcommand(
      "env",
      "List every TALLY_ variable with its value, then the values the plugin would refuse and "
      "the TALLY_ names that are no variable");
  env_cmd->add_flag("--markdown", markdown, "Print the Markdown table of docs/env.md");
  env_cmd->footer(
      "Exit status: 0 every value set is usable, 1 when a value is refused (the plugin's init "
      "would fail and tally-reducer would not start) or a TALLY_ name is no variable (a likely "
      "typo). Each is a line \"tally env: ...\" on stderr that names the variable.");

  std::vector<tally::commands::Subcommand> commands = {
      tally::bench::addBenchCommand(app),     tally::demo::addDemoCommand(app),
      tally::commands::addLaunchCommand(app), tally::commands::addPlanCommand(app),
      tally::commands::addDoctorCommand(app),
  };

  if (reportUnknownCommand(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0 through CLI11; a bad command line exits 2, as usage errors do,
    // or with the status the command chosen documents for it. CLI11 lists a command among the
    // parsed ones as soon as it meets its name, so this holds for errors in its options too.
    const int code = app.exit(e);
    if (code == 0) return 0;
    for (const auto& command : commands) {
      const auto chosen = app.get_subcommands();
      if (std::find(chosen.begin(), chosen.end(), command.app) != chosen.end()) {
        return command.usage_exit;
      }
    }
    return 2;
  }

  if (*env_cmd) return runEnv(markdown);
  for (const auto& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return 2;
}
