// SPDX-License-Identifier: Apache-2.0
// Command-line errors in Tally's words, for `tally` and `tally-reducer`. CLI11 finds what is wrong
// with a command line; these functions say it as one line that names the option and what it
// takes, instead of CLI11's own text ("The following arguments were not expected: 3 --worker"):
//
//   unknown option --worker; did you mean --workers?
//   unexpected argument 'extra': doctor takes options only
//   --bucket needs a value: bytes of the all-reduce to predict, K/M/G binary units (default 64M)
//   --workers: expected an integer from 2 to 64, got '1'
//   --transport: expected one of auto, tcp, ofi, verbs, got 'rdma'
//   --listen is required: HOST:PORT to listen on (port 0 picks one)
//
// The caller prints the line after its program's name ("tally bench: ...") and exits with its
// usage status. A separate library (tally_cli) so that tally_common, which the plugin links,
// does not depend on CLI11. Everything here is pure: no output, no exit.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tally::cli {

// The message for a command line that `app` could not parse: `error` is what CLI11 threw (not a
// CLI::Success, which is --help or --version), `args` the words given to `app`, after the
// program's and the command's names. A word with no place (strayWord) is reported first,
// whatever CLI11 threw. Falls back to CLI11's own text for an error it does not know.
std::string usageError(const CLI::App& app, const CLI::ParseError& error,
                       const std::vector<std::string>& args);

// The first word of `args` that `app` has no place for: an option it does not have ("--worker",
// "-x", "--worker" for "--worker=3"), or a plain word when it takes no positional arguments.
// Values of the options that take one are skipped, and so is everything after "--" when the
// app takes positional arguments. "" when every word has its place.
std::string strayWord(const CLI::App& app, const std::vector<std::string>& args);

// "unknown option --worker; did you mean --workers?" for a word that starts with '-', with the
// nearest of the app's visible long options when one is near enough (common/suggest.h; none for
// a one-letter option); "unexpected argument 'word': NAME takes options only" for any other word.
std::string strayWordMessage(const CLI::App& app, const std::string& word);

// What an option takes, for messages and docs: "an integer from 2 to 64", "one of auto, tcp",
// "a number"; "" for plain text, whose description says it.
std::string valueKind(const CLI::Option& option);

}  // namespace tally::cli
