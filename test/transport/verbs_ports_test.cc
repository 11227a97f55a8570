// SPDX-License-Identifier: Apache-2.0
// TALLY_IB_HCA parsing and port selection, port speeds and the RoCE GID choice: pure functions.
#include <gtest/gtest.h>

#include "transport/verbs/ports.h"

namespace tally::transport::verbs {
namespace {

PortRecord port(const std::string& device, int number, bool active = true,
                int link = IBV_LINK_LAYER_INFINIBAND) {
  PortRecord r;
  r.device = device;
  r.port = number;
  r.active = active;
  r.link_layer = link;
  r.speed_mbps = 100000;
  return r;
}

std::vector<PortRecord> fleet() {
  return {port("mlx5_0", 1),        port("mlx5_0", 2),
          port("mlx5_1", 1),        port("mlx5_10", 1),
          port("mlx5_2", 1, false), port("rxe0", 1, true, IBV_LINK_LAYER_ETHERNET)};
}

std::string names(const std::vector<PortRecord>& ports) {
  std::string text;
  for (const PortRecord& p : ports) {
    text += (text.empty() ? "" : " ") + p.device + ":" + std::to_string(p.port);
  }
  return text;
}

std::string select(const std::string& spec) {
  std::vector<PortRecord> out;
  Status status = selectPorts(spec, fleet(), &out);
  return status.isOk() ? names(out) : "error: " + status.message();
}

TEST(VerbsPortsTest, EmptySpecTakesEveryActivePort) {
  EXPECT_EQ(select(""), "mlx5_0:1 mlx5_0:2 mlx5_1:1 mlx5_10:1 rxe0:1");
}

TEST(VerbsPortsTest, PrefixesAndPorts) {
  EXPECT_EQ(select("mlx5_1"), "mlx5_1:1 mlx5_10:1");
  EXPECT_EQ(select("mlx5_0:2"), "mlx5_0:2");
  EXPECT_EQ(select("mlx5_0:2, rxe"), "mlx5_0:2 rxe0:1");
  EXPECT_EQ(select("mlx"), "mlx5_0:1 mlx5_0:2 mlx5_1:1 mlx5_10:1");
}

TEST(VerbsPortsTest, ExactMatch) {
  EXPECT_EQ(select("=mlx5_1"), "mlx5_1:1");
  EXPECT_EQ(select("=mlx5_0:1,mlx5_10"), "mlx5_0:1 mlx5_10:1");
}

TEST(VerbsPortsTest, Exclusion) {
  EXPECT_EQ(select("^mlx5_0"), "mlx5_1:1 mlx5_10:1 rxe0:1");
  EXPECT_EQ(select("^mlx5_0:1"), "mlx5_0:2 mlx5_1:1 mlx5_10:1 rxe0:1");
  EXPECT_EQ(select("^=mlx5_1"), "mlx5_0:1 mlx5_0:2 mlx5_10:1 rxe0:1");
}

TEST(VerbsPortsTest, DownPortsAreNeverChosen) {
  std::string text = select("mlx5_2");
  EXPECT_EQ(text.rfind("error: no active RDMA port matches TALLY_IB_HCA \"mlx5_2\"", 0), 0u)
      << text;
  EXPECT_NE(text.find("mlx5_2:1 IB down"), std::string::npos) << text;
  EXPECT_NE(text.find("rxe0:1 RoCE active"), std::string::npos) << text;
}

TEST(VerbsPortsTest, NoPortsAtAll) {
  std::vector<PortRecord> out;
  Status status = selectPorts("", {}, &out);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(status.message().find("(have: none)"), std::string::npos) << status.toString();
}

TEST(VerbsPortsTest, BadSpecs) {
  for (const char* spec : {"mlx5_0:", "mlx5_0:0", "mlx5_0:256", "mlx5_0:x", ":1", "^", "^="}) {
    HcaSpec parsed;
    Status status = parseHcaSpec(spec, &parsed);
    EXPECT_EQ(status.code(), StatusCode::kInvalidUsage) << spec;
    EXPECT_NE(status.message().find("TALLY_IB_HCA"), std::string::npos) << status.toString();
  }
  HcaSpec parsed;
  ASSERT_TRUE(parseHcaSpec("^=a:3, b ,,", &parsed).isOk());
  EXPECT_TRUE(parsed.exclude);
  EXPECT_TRUE(parsed.exact);
  ASSERT_EQ(parsed.entries.size(), 2u);
  EXPECT_EQ(parsed.entries[0].name, "a");
  EXPECT_EQ(parsed.entries[0].port, 3);
  EXPECT_EQ(parsed.entries[1].name, "b");
  EXPECT_EQ(parsed.entries[1].port, 0);
}

TEST(VerbsPortsTest, Speeds) {
  EXPECT_EQ(portSpeedMbps(2, 32), 100000);   // 4x EDR
  EXPECT_EQ(portSpeedMbps(2, 64), 200000);   // 4x HDR
  EXPECT_EQ(portSpeedMbps(2, 128), 400000);  // 4x NDR
  EXPECT_EQ(portSpeedMbps(1, 1), 2500);      // 1x SDR
  EXPECT_EQ(portSpeedMbps(16, 64), 100000);  // 2x HDR
  EXPECT_EQ(portSpeedMbps(0, 32), 0);
  EXPECT_EQ(portSpeedMbps(2, 3), 0);
}

GidEntry gid(int index, std::initializer_list<uint8_t> bytes, const char* type) {
  GidEntry e;
  e.index = index;
  int i = 0;
  for (uint8_t b : bytes) e.gid[i++] = b;
  e.type = type;
  return e;
}

TEST(VerbsPortsTest, GidChoicePrefersRoceV2Ipv4) {
  GidEntry link_local_v1 =
      gid(0, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, "IB/RoCE v1");
  GidEntry link_local_v2 =
      gid(1, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, "RoCE v2");
  GidEntry v4_v1 = gid(2, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, "IB/RoCE v1");
  GidEntry v4_v2 = gid(3, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1}, "RoCE v2");
  GidEntry v6_v2 = gid(4, {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, "RoCE v2");
  EXPECT_EQ(chooseGidIndex({link_local_v1, link_local_v2, v4_v1, v4_v2, v6_v2}), 3);
  EXPECT_EQ(chooseGidIndex({link_local_v1, link_local_v2, v4_v1, v6_v2}), 4);
  EXPECT_EQ(chooseGidIndex({link_local_v1, link_local_v2, v4_v1}), 0);
  EXPECT_EQ(chooseGidIndex({gid(0, {}, "RoCE v2")}), -1);
  EXPECT_EQ(chooseGidIndex({}), -1);
}

}  // namespace
}  // namespace tally::transport::verbs
