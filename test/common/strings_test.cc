// SPDX-License-Identifier: Apache-2.0
// common/strings.h: trimming, splitting, joining, case, number/suffix and "host:port" splitting.
#include "common/strings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tally {
namespace {

using Strings = std::vector<std::string>;

TEST(Trim, DropsLeadingAndTrailingWhitespaceOnly) {
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim(" \t\r\n\v\f"), "");
  EXPECT_EQ(trim("abc"), "abc");
  EXPECT_EQ(trim("  a b\t c \n"), "a b\t c");
  EXPECT_EQ(trim("\tx"), "x");
  EXPECT_EQ(trim("x\r\n"), "x");
  // A NUL is not whitespace.
  EXPECT_EQ(trim(std::string(" a\0 ", 4)), std::string("a\0", 2));
}

TEST(TrimRight, ShrinksInPlace) {
  std::string s = "secret \t\r\n";
  trimRight(&s);
  EXPECT_EQ(s, "secret");
  s = "  lead stays";
  trimRight(&s);
  EXPECT_EQ(s, "  lead stays");
  s = " \n";
  trimRight(&s);
  EXPECT_EQ(s, "");
  s = "";
  trimRight(&s);
  EXPECT_EQ(s, "");
}

TEST(Split, KeepsEveryFieldAsWritten) {
  EXPECT_EQ(split("", ','), Strings{""});
  EXPECT_EQ(split("a", ','), Strings{"a"});
  EXPECT_EQ(split("a,,b,", ','), (Strings{"a", "", "b", ""}));
  EXPECT_EQ(split(",", ','), (Strings{"", ""}));
  EXPECT_EQ(split(" a ; b ", ';'), (Strings{" a ", " b "}));
  EXPECT_EQ(split("a,b", ';'), Strings{"a,b"});
}

TEST(SplitList, TrimsAndDropsEmptyItems) {
  EXPECT_EQ(splitList(""), Strings{});
  EXPECT_EQ(splitList(" , ,\t"), Strings{});
  EXPECT_EQ(splitList("h:1"), Strings{"h:1"});
  EXPECT_EQ(splitList(" h:1 ,[::1]:2 "), (Strings{"h:1", "[::1]:2"}));
  EXPECT_EQ(splitList("a:1, b:2,,"), (Strings{"a:1", "b:2"}));
  EXPECT_EQ(splitList(",\tx y ,"), Strings{"x y"});
  EXPECT_EQ(splitList("ofi_rxm; verbs ;", ';'), (Strings{"ofi_rxm", "verbs"}));
  EXPECT_EQ(splitList("a,b", ';'), Strings{"a,b"});
}

TEST(Join, PutsTheSeparatorBetweenItems) {
  EXPECT_EQ(join({}, ","), "");
  EXPECT_EQ(join({"a"}, ","), "a");
  EXPECT_EQ(join({"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(join({"", "b"}, ":"), ":b");
  EXPECT_EQ(join({"a", "b"}, ""), "ab");
  // split undoes join when no item holds the separator.
  EXPECT_EQ(split(join({"x", "", "y"}, ";"), ';'), (Strings{"x", "", "y"}));
}

TEST(Case, ChangesAsciiLettersOnly) {
  EXPECT_EQ(toLower("AllReduce_V2"), "allreduce_v2");
  EXPECT_EQ(toUpper("64kib"), "64KIB");
  EXPECT_EQ(toLower(""), "");
  EXPECT_EQ(toUpper("\xc3\xa9-1"), "\xc3\xa9-1");  // UTF-8 bytes pass through
}

TEST(Affixes, StartsWithAndEndsWith) {
  EXPECT_TRUE(startsWith("ofi_rxm", "ofi_"));
  EXPECT_TRUE(startsWith("abc", ""));
  EXPECT_TRUE(startsWith("abc", "abc"));
  EXPECT_FALSE(startsWith("ab", "abc"));
  EXPECT_FALSE(startsWith("xofi_", "ofi_"));
  EXPECT_TRUE(endsWith("/lib/libnccl-net.so", "/libnccl-net.so"));
  EXPECT_TRUE(endsWith("abc", ""));
  EXPECT_FALSE(endsWith("bc", "abc"));
  EXPECT_FALSE(endsWith("libnccl-net.so.1", ".so"));
}

TEST(SplitNumber, NumberAndTrimmedSuffix) {
  uint64_t n = 0;
  std::string suffix;
  ASSERT_TRUE(splitNumber("64K", &n, &suffix).isOk());
  EXPECT_EQ(n, 64u);
  EXPECT_EQ(suffix, "K");
  ASSERT_TRUE(splitNumber(" 10 ms ", &n, &suffix).isOk());
  EXPECT_EQ(n, 10u);
  EXPECT_EQ(suffix, "ms");
  ASSERT_TRUE(splitNumber("0", &n, &suffix).isOk());
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(suffix, "");
  ASSERT_TRUE(splitNumber("18446744073709551615", &n, &suffix).isOk());
  EXPECT_EQ(n, UINT64_MAX);
  ASSERT_TRUE(splitNumber("12 34", &n, &suffix).isOk());  // the caller judges the suffix
  EXPECT_EQ(n, 12u);
  EXPECT_EQ(suffix, "34");
}

TEST(SplitNumber, RefusesMissingOrHugeNumbers) {
  for (const char* bad : {"", "  ", "K", "-1", "+1", ".5", "x12", "18446744073709551616"}) {
    uint64_t n = 7;
    std::string suffix = "untouched";
    const Status st = splitNumber(bad, &n, &suffix);
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage) << bad;
    EXPECT_NE(st.message().find(std::string("'") + bad + "'"), std::string::npos) << st.message();
    EXPECT_EQ(n, 7u) << bad;
    EXPECT_EQ(suffix, "untouched") << bad;
  }
}

TEST(SplitHostPort, HostsPortsAndBrackets) {
  std::string host;
  uint16_t port = 0;
  ASSERT_TRUE(splitHostPort("10.0.0.1:5000", &host, &port).isOk());
  EXPECT_EQ(host, "10.0.0.1");
  EXPECT_EQ(port, 5000);
  ASSERT_TRUE(splitHostPort("[fe80::1%eth0]:7", &host, &port).isOk());
  EXPECT_EQ(host, "fe80::1%eth0");
  EXPECT_EQ(port, 7);
  ASSERT_TRUE(splitHostPort(":0", &host, &port).isOk());
  EXPECT_EQ(host, "");
  EXPECT_EQ(port, 0);
  ASSERT_TRUE(splitHostPort("localhost:80", &host, &port).isOk());
  EXPECT_EQ(host, "localhost");
  ASSERT_TRUE(splitHostPort("h:65535", &host, &port).isOk());
  EXPECT_EQ(port, 65535);
  ASSERT_TRUE(splitHostPort("h:00080", &host, &port).isOk());
  EXPECT_EQ(port, 80);
  ASSERT_TRUE(splitHostPort("[]:1", &host, &port).isOk());  // empty, as ":1"
  EXPECT_EQ(host, "");
}

TEST(SplitHostPort, RefusesMalformedTextAndLeavesOutputsAlone) {
  for (const char* bad : {"", "host", "host:", "host:x", "host:65536", "[::1]", "[::1]5", "::1:5",
                          "h:123456", "h: 80", "h:+80", "h:-1", "[::1:5", "[::1]:", "[::1]:1:2"}) {
    std::string host = "untouched";
    uint16_t port = 4242;
    const Status st = splitHostPort(bad, &host, &port);
    EXPECT_EQ(st.code(), StatusCode::kInvalidUsage) << bad;
    EXPECT_NE(st.message().find(std::string("\"") + bad + "\""), std::string::npos) << st.message();
    EXPECT_EQ(host, "untouched") << bad;
    EXPECT_EQ(port, 4242) << bad;
  }
}

TEST(SplitHostPort, MessagesSayWhatWasExpected) {
  std::string host;
  uint16_t port = 0;
  EXPECT_NE(splitHostPort("host", &host, &port).message().find("expected host:port"),
            std::string::npos);
  EXPECT_NE(splitHostPort("[::1]", &host, &port).message().find("expected [v6]:port"),
            std::string::npos);
  EXPECT_NE(splitHostPort("::1:5", &host, &port).message().find("[v6]:port"), std::string::npos);
  EXPECT_NE(splitHostPort("h:70000", &host, &port).message().find("0 to 65535"), std::string::npos);
}

TEST(JoinHostPort, BracketsWhatWouldNotSplitBack) {
  EXPECT_EQ(joinHostPort("10.0.0.1", 80), "10.0.0.1:80");
  EXPECT_EQ(joinHostPort("fe80::1%eth0", 0), "[fe80::1%eth0]:0");
  EXPECT_EQ(joinHostPort("", 5000), ":5000");
  EXPECT_EQ(joinHostPort("[a", 1), "[[a]:1");
  for (const char* text : {"h:1", "[::1]:2", ":0", "[[a]:3", "a]b:65535", "[x]:4"}) {
    std::string host;
    uint16_t port = 0;
    ASSERT_TRUE(splitHostPort(text, &host, &port).isOk()) << text;
    std::string host2;
    uint16_t port2 = 1;
    ASSERT_TRUE(splitHostPort(joinHostPort(host, port), &host2, &port2).isOk()) << text;
    EXPECT_EQ(host2, host) << text;
    EXPECT_EQ(port2, port) << text;
  }
}

}  // namespace
}  // namespace tally
