// SPDX-License-Identifier: Apache-2.0
// Slurm hostlist expressions (tools/commands/hostlist.h): ranges with and without leading zeros,
// several ranges and items, products of brackets, and every kind of malformed input.
#include "tools/commands/hostlist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tally::commands {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> expand(const std::string& text) {
  std::vector<std::string> names;
  Status st = expandHostlist(text, &names);
  EXPECT_TRUE(st.isOk()) << text << ": " << st.toString();
  return names;
}

std::string errorOf(const std::string& text) {
  std::vector<std::string> names = {"untouched"};
  Status st = expandHostlist(text, &names);
  EXPECT_FALSE(st.isOk()) << text << " expanded to " << names.size() << " names";
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_THAT(names, ElementsAre("untouched"));
  return st.message();
}

TEST(Hostlist, PlainNames) {
  EXPECT_THAT(expand("gpu01"), ElementsAre("gpu01"));
  EXPECT_THAT(expand("a,b.example.com,c-1"), ElementsAre("a", "b.example.com", "c-1"));
}

TEST(Hostlist, RangesKeepTheWidthOfTheirFirstBound) {
  EXPECT_THAT(expand("node[01-03,07]"), ElementsAre("node01", "node02", "node03", "node07"));
  EXPECT_THAT(expand("n[8-10]"), ElementsAre("n8", "n9", "n10"));
  EXPECT_THAT(expand("n[098-101]"), ElementsAre("n098", "n099", "n100", "n101"));
  EXPECT_THAT(expand("n[007]"), ElementsAre("n007"));
  EXPECT_THAT(expand("n[0-0]"), ElementsAre("n0"));
}

TEST(Hostlist, ItemsAndSuffixes) {
  EXPECT_THAT(expand("gpu[1-2],cpu[05-06],login"),
              ElementsAre("gpu1", "gpu2", "cpu05", "cpu06", "login"));
  EXPECT_THAT(expand("n[1-2]-ib"), ElementsAre("n1-ib", "n2-ib"));
  EXPECT_THAT(expand("rack[1-2]-n[8-9]"),
              ElementsAre("rack1-n8", "rack1-n9", "rack2-n8", "rack2-n9"));
}

TEST(Hostlist, MalformedInputIsAClearError) {
  EXPECT_THAT(errorOf(""), HasSubstr("empty"));
  EXPECT_THAT(errorOf("a,,b"), HasSubstr("empty host name"));
  EXPECT_THAT(errorOf("a,"), HasSubstr("empty host name"));
  EXPECT_THAT(errorOf("node[01-03"), HasSubstr("'[' without its ']'"));
  EXPECT_THAT(errorOf("node01-03]"), HasSubstr("']' without its '['"));
  EXPECT_THAT(errorOf("node[[1-2]]"), HasSubstr("do not nest"));
  EXPECT_THAT(errorOf("node[]"), HasSubstr("expected a number or a range"));
  EXPECT_THAT(errorOf("node[1-]"), HasSubstr("expected a number or a range"));
  EXPECT_THAT(errorOf("node[a-c]"), HasSubstr("\"a-c\""));
  EXPECT_THAT(errorOf("node[1,,2]"), HasSubstr("expected a number or a range"));
  EXPECT_THAT(errorOf("node[1-2-3]"), HasSubstr("expected a number or a range"));
  EXPECT_THAT(errorOf("node[05-01]"), HasSubstr("ends below its start"));
  EXPECT_THAT(errorOf("node[1 -2]"), HasSubstr("blank"));
  EXPECT_THAT(errorOf("node[0-99999999]"), HasSubstr("more than 65536 names"));
  EXPECT_THAT(errorOf("a[0-999]b[0-999]"), HasSubstr("more than 65536 names"));
  EXPECT_THAT(errorOf("n[1-99999999999999999999]"), HasSubstr("expected a number or a range"));
  // The message quotes the expression.
  EXPECT_THAT(errorOf("gpu[2-1]"), HasSubstr("hostlist \"gpu[2-1]\""));
}

}  // namespace
}  // namespace tally::commands
