// SPDX-License-Identifier: Apache-2.0
// The `tally` command: `tally bench` (all-reduce bandwidth of the reduction server beside a ring
// and Gloo, tools/bench/), `tally demo` (a preset of the bench), `tally env` (every TALLY_
// variable; --markdown prints docs/env.md), and the cluster commands `tally launch`, `tally plan`
// and `tally doctor` (tools/commands/); `tally help COMMAND` prints COMMAND's --help. A bad command
// line is one line in Tally's words on stderr (common/cli_usage.h: a mistyped option names the
// nearest one) and exits 2 (`tally doctor`'s exits 3, as docs/doctor.md says); an unknown command
// names the nearest one. `--version` prints "tally VERSION".
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/cli_usage.h"
#include "common/params.h"
#include "common/strings.h"
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

// The names of every command `tally` has, in the order --help lists them.
std::vector<std::string> commandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

// A word that names no command: the message, with the nearest command and the list. CLI11 alone
// would say only "A subcommand is required".
void reportUnknownCommand(const CLI::App& app, const std::string& word) {
  const std::vector<std::string> names = commandNames(app);
  const std::string nearest = tally::nearestName(word, names);
  std::fprintf(stderr, "tally: unknown command '%s'", word.c_str());
  if (!nearest.empty()) std::fprintf(stderr, "; did you mean '%s'?", nearest.c_str());
  std::fprintf(stderr, "\ncommands: %s\nRun 'tally --help' for what each does.\n",
               tally::join(names, ", ").c_str());
}

// The command line CLI11 parses, with `tally help COMMAND` read as `tally COMMAND --help` (and
// `tally help` as `tally --help`), so both print the same text. False, with the message printed,
// when the command line names no command; `*command` is the command's position in `args`, or
// args.size() when there is none.
bool commandLine(const CLI::App& app, std::vector<std::string>* args, size_t* command) {
  size_t at = 0;
  while (at < args->size() && !(*args)[at].empty() && (*args)[at][0] == '-') ++at;
  *command = at;
  if (at == args->size()) return true;
  const std::vector<std::string> names = commandNames(app);
  auto known = [&](const std::string& word) {
    return std::find(names.begin(), names.end(), word) != names.end();
  };
  if ((*args)[at] == "help") {
    if (at + 1 == args->size()) {
      *args = {"--help"};
      *command = args->size();
      return true;
    }
    const std::string topic = (*args)[at + 1];
    if (!topic.empty() && topic[0] == '-') {  // `tally help --help`
      *args = {"--help"};
      *command = args->size();
      return true;
    }
    if (!known(topic)) {
      reportUnknownCommand(app, topic);
      return false;
    }
    *args = {topic, "--help"};
    *command = 0;
    return true;
  }
  if (!known((*args)[at])) {
    reportUnknownCommand(app, (*args)[at]);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // Named, so that help and messages say "tally", not the path it was run by.
  CLI::App app{"tally: NCCL reduction server tools", "tally"};
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
      "typo), 2 bad options. Each is a line \"tally env: ...\" on stderr that names the "
      "variable.");

  std::vector<tally::commands::Subcommand> commands = {
      {env_cmd, [&markdown] { return runEnv(markdown); }},
      tally::bench::addBenchCommand(app),
      tally::demo::addDemoCommand(app),
      tally::commands::addLaunchCommand(app),
      tally::commands::addPlanCommand(app),
      tally::commands::addDoctorCommand(app),
  };
  // Listed in --help; `tally help COMMAND` never reaches CLI11 (commandLine() rewrites it).
  app.add_subcommand("help", "Print a command's help: tally help COMMAND is tally COMMAND --help")
      ->allow_extras();

  std::vector<std::string> args(argv + 1, argv + argc);
  size_t at = 0;
  if (!commandLine(app, &args, &at)) return 2;
  // Options before the command are tally's own (--help, --version).
  const std::vector<std::string> before(args.begin(), args.begin() + static_cast<long>(at));
  if (const std::string stray = tally::cli::strayWord(app, before); !stray.empty()) {
    std::fprintf(stderr, "tally: %s\n", tally::cli::strayWordMessage(app, stray).c_str());
    return 2;
  }
  if (at == args.size() && before.empty()) {
    std::fprintf(stderr,
                 "tally: no command given; commands: %s\nRun 'tally --help' for what "
                 "each does.\n",
                 tally::join(commandNames(app), ", ").c_str());
    return 2;
  }

  std::vector<char*> words = {argv[0]};
  for (std::string& arg : args) words.push_back(arg.data());
  try {
    app.parse(static_cast<int>(words.size()), words.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version: CLI11 prints them, and the help of the command chosen.
    if (dynamic_cast<const CLI::Success*>(&e) != nullptr) return app.exit(e);
    // A bad command line: one line in Tally's words on stderr, and the status the command
    // documents for it (2, as usage errors do; `tally doctor`'s is 3). CLI11 lists a command
    // among the parsed ones as soon as it meets its name, so this holds for errors in its
    // options too.
    const auto chosen = app.get_subcommands();
    for (const auto& command : commands) {
      if (std::find(chosen.begin(), chosen.end(), command.app) == chosen.end()) continue;
      const std::string name = command.app->get_name();
      const std::vector<std::string> given(args.begin() + static_cast<long>(at) + 1, args.end());
      const std::string message = tally::cli::usageError(*command.app, e, given);
      std::fprintf(stderr, "tally %s: %s\n", name.c_str(), message.c_str());
      if (command.usage_error) command.usage_error(message, given);
      return command.usage_exit;
    }
    std::fprintf(stderr, "tally: %s\n", e.what());
    return 2;
  }

  for (const auto& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return 2;
}
