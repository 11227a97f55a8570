// SPDX-License-Identifier: Apache-2.0
// common/cli_usage.h against small CLI11 apps: which word has no place, what an option takes, and
// the message for each kind of error CLI11 throws.
#include "common/cli_usage.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tally::cli {
namespace {

// An app shaped like `tally bench`: a few options with values, a flag, a hidden option.
struct BenchLike {
  CLI::App app{"bench-like", "bench"};
  int workers = 4;
  std::string bucket = "64M";
  std::string transport;
  double seconds = 1;
  double gbps = 0;
  unsigned mtu = 1500;
  std::vector<std::string> sizes;
  bool verbose = false;
  int hidden = 0;
  BenchLike() {
    app.add_option("-n,--workers", workers, "Worker processes (ranks)")->check(CLI::Range(2, 64));
    app.add_option("--bucket", bucket, "Bytes of the all-reduce to predict");
    app.add_option("--transport", transport, "Network")->check(CLI::IsMember({"tcp", "ofi"}));
    app.add_option("--probe-seconds", seconds, "How long")->check(CLI::Range(0.0, 60.0));
    app.add_option("--worker-gbps", gbps, "Link speed")->check(CLI::NonNegativeNumber);
    app.add_option("--mtu", mtu, "MTU of the links");
    app.add_option("--sizes", sizes, "Sizes")->delimiter(',');
    app.add_flag("--verbose", verbose, "Say more");
    app.add_option("--debug-hook", hidden)->group("");
  }
  // The message for args, or "" when they parse.
  std::string error(std::vector<std::string> args) {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
      app.parse(reversed);
    } catch (const CLI::ParseError& e) {
      return usageError(app, e, args);
    }
    return "";
  }
};

TEST(StrayWord, SkipsValuesAndFindsTheFirstUnknownWord) {
  BenchLike b;
  EXPECT_EQ(strayWord(b.app, {"--workers", "4", "--bucket=1M", "--verbose"}), "");
  EXPECT_EQ(strayWord(b.app, {"-n", "4", "-n4", "--worker", "3"}), "--worker");
  EXPECT_EQ(strayWord(b.app, {"--worker=3"}), "--worker");
  // A negative number is a value, not an option.
  EXPECT_EQ(strayWord(b.app, {"--worker-gbps", "-1"}), "");
  // Several values for an option that takes several.
  EXPECT_EQ(strayWord(b.app, {"--sizes", "4K", "1M", "--verbose"}), "");
  EXPECT_EQ(strayWord(b.app, {"--verbose", "extra"}), "extra");
  EXPECT_EQ(strayWord(b.app, {"--", "extra"}), "extra");
  // An app with a positional takes plain words and everything after "--".
  CLI::App with_command{"", "launch"};
  std::vector<std::string> command;
  with_command.add_option("command", command, "The command");
  EXPECT_EQ(strayWord(with_command, {"python", "--", "train.py", "--epochs", "3"}), "");
  EXPECT_EQ(strayWord(with_command, {"--dry-rn", "--", "true"}), "--dry-rn");
}

TEST(StrayWordMessage, SuggestsTheNearestVisibleLongOption) {
  BenchLike b;
  EXPECT_EQ(strayWordMessage(b.app, "--worker"),
            "unknown option --worker; did you mean --workers?");
  EXPECT_EQ(strayWordMessage(b.app, "--worker=3"),
            "unknown option --worker; did you mean --workers?");
  // Hidden options are never offered; nothing near, no guess; one letter, no guess.
  EXPECT_EQ(strayWordMessage(b.app, "--debug-hok"), "unknown option --debug-hok");
  EXPECT_EQ(strayWordMessage(b.app, "--xylophone"), "unknown option --xylophone");
  EXPECT_EQ(strayWordMessage(b.app, "-x"), "unknown option -x");
  EXPECT_EQ(strayWordMessage(b.app, "extra"),
            "unexpected argument 'extra': bench takes options only");
}

TEST(ValueKind, SaysWhatTheOptionTakes) {
  BenchLike b;
  EXPECT_EQ(valueKind(*b.app.get_option("--workers")), "an integer from 2 to 64");
  EXPECT_EQ(valueKind(*b.app.get_option("--transport")), "one of tcp, ofi");
  EXPECT_EQ(valueKind(*b.app.get_option("--probe-seconds")), "a number from 0 to 60");
  EXPECT_EQ(valueKind(*b.app.get_option("--worker-gbps")), "a number of 0 or more");
  EXPECT_EQ(valueKind(*b.app.get_option("--mtu")), "an integer of 0 or more");
  EXPECT_EQ(valueKind(*b.app.get_option("--bucket")), "");
}

TEST(UsageError, NamesTheOptionAndWhatItTakes) {
  BenchLike b;
  EXPECT_EQ(b.error({"--worker", "3"}), "unknown option --worker; did you mean --workers?");
  EXPECT_EQ(b.error({"--bucket"}), "--bucket needs a value: bytes of the all-reduce to predict");
  EXPECT_EQ(b.error({"--workers"}),
            "--workers needs a value: an integer from 2 to 64 (worker processes (ranks))");
  EXPECT_EQ(b.error({"--workers", "1"}), "--workers: expected an integer from 2 to 64, got '1'");
  EXPECT_EQ(b.error({"-n", "x"}), "--workers: expected an integer from 2 to 64, got 'x'");
  EXPECT_EQ(b.error({"--mtu", "abc"}), "--mtu: expected an integer of 0 or more, got 'abc'");
  EXPECT_EQ(b.error({"--transport", "rdma"}), "--transport: expected one of tcp, ofi, got 'rdma'");
  EXPECT_EQ(b.error({"--probe-seconds=99"}),
            "--probe-seconds: expected a number from 0 to 60, "
            "got '99'");
  EXPECT_EQ(b.error({"stray"}), "unexpected argument 'stray': bench takes options only");
  EXPECT_EQ(b.error({"--workers", "8", "--verbose"}), "");
}

TEST(UsageError, ARequiredOptionAndAMistypedOneNameTheMistypedOne) {
  CLI::App app{"", "tally-reducer"};
  std::string listen;
  app.add_option("--listen", listen, "HOST:PORT to listen on")->required();
  auto error = [&app](std::vector<std::string> args) {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
      app.parse(reversed);
    } catch (const CLI::ParseError& e) {
      return usageError(app, e, args);
    }
    return std::string();
  };
  EXPECT_EQ(error({}), "--listen is required: HOST:PORT to listen on");
  EXPECT_EQ(error({"--lisen", ":0"}), "unknown option --lisen; did you mean --listen?");
}

}  // namespace
}  // namespace tally::cli
