// SPDX-License-Identifier: Apache-2.0
// The queue-pair state machine: the attributes and masks of each transition, and its order.
#include <gtest/gtest.h>

#include <cstring>

#include "transport/verbs/qp_state.h"

namespace tally::transport::verbs {
namespace {

QpEndpoint ibEndpoint(uint32_t qp_num, uint32_t psn, uint16_t lid, ibv_mtu mtu) {
  QpEndpoint e;
  e.qp_num = qp_num;
  e.psn = psn;
  e.lid = lid;
  e.mtu = mtu;
  e.port = 1;
  e.link_layer = IBV_LINK_LAYER_INFINIBAND;
  return e;
}

QpEndpoint roceEndpoint(uint32_t qp_num, uint32_t psn, uint8_t last_gid_byte, ibv_mtu mtu) {
  QpEndpoint e;
  e.qp_num = qp_num;
  e.psn = psn;
  e.gid[10] = 0xff;
  e.gid[11] = 0xff;
  e.gid[12] = 10;
  e.gid[15] = last_gid_byte;
  e.gid_index = 3;
  e.mtu = mtu;
  e.port = 2;
  e.link_layer = IBV_LINK_LAYER_ETHERNET;
  return e;
}

TEST(VerbsQpStateTest, InfiniBandTransitions) {
  QpStateMachine qp;
  QpEndpoint local = ibEndpoint(0x1234, 0x111111, 7, IBV_MTU_4096);
  QpEndpoint remote = ibEndpoint(0xabcdef, 0x222222, 9, IBV_MTU_2048);
  QpTransition t;

  ASSERT_TRUE(qp.toInit(local, &t).isOk());
  EXPECT_EQ(qp.state(), QpStateMachine::State::kInit);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(t.attr.port_num, 1);
  EXPECT_EQ(t.attr.pkey_index, 0);
  EXPECT_EQ(t.attr.qp_access_flags,
            static_cast<unsigned>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));

  ASSERT_TRUE(qp.toRtr(local, remote, &t).isOk());
  EXPECT_EQ(qp.state(), QpStateMachine::State::kRtr);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(t.attr.path_mtu, IBV_MTU_2048);  // the smaller of both
  EXPECT_EQ(t.attr.dest_qp_num, 0xabcdefu);
  EXPECT_EQ(t.attr.rq_psn, 0x222222u);  // the peer's first PSN
  EXPECT_EQ(t.attr.max_dest_rd_atomic, 1);
  EXPECT_EQ(t.attr.min_rnr_timer, 12);
  EXPECT_EQ(t.attr.ah_attr.is_global, 0);
  EXPECT_EQ(t.attr.ah_attr.dlid, 9);
  EXPECT_EQ(t.attr.ah_attr.port_num, 1);
  EXPECT_EQ(t.attr.ah_attr.sl, 0);

  ASSERT_TRUE(qp.toRts(local, &t).isOk());
  EXPECT_EQ(qp.state(), QpStateMachine::State::kRts);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                        IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(t.attr.sq_psn, 0x111111u);  // our own first PSN
  EXPECT_EQ(t.attr.timeout, 20);
  EXPECT_EQ(t.attr.retry_cnt, 7);
  EXPECT_EQ(t.attr.rnr_retry, 7);
  EXPECT_EQ(t.attr.max_rd_atomic, 1);
}

TEST(VerbsQpStateTest, RoceRoutesByGid) {
  QpSettings settings;
  settings.traffic_class = 106;
  settings.service_level = 3;
  QpStateMachine qp(settings);
  QpEndpoint local = roceEndpoint(10, 20, 1, IBV_MTU_1024);
  QpEndpoint remote = roceEndpoint(30, 40, 2, IBV_MTU_4096);
  QpTransition t;
  ASSERT_TRUE(qp.toInit(local, &t).isOk());
  EXPECT_EQ(t.attr.port_num, 2);
  ASSERT_TRUE(qp.toRtr(local, remote, &t).isOk());
  EXPECT_EQ(t.attr.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(t.attr.ah_attr.is_global, 1);
  EXPECT_EQ(0, std::memcmp(t.attr.ah_attr.grh.dgid.raw, remote.gid, 16));
  EXPECT_EQ(t.attr.ah_attr.grh.sgid_index, 3);
  EXPECT_EQ(t.attr.ah_attr.grh.hop_limit, 255);
  EXPECT_EQ(t.attr.ah_attr.grh.traffic_class, 106);
  EXPECT_EQ(t.attr.ah_attr.sl, 3);
  EXPECT_EQ(t.attr.ah_attr.dlid, 0);
  EXPECT_EQ(t.attr.ah_attr.port_num, 2);
}

TEST(VerbsQpStateTest, GlobalRouteOnInfiniBandWhenAsked) {
  QpSettings settings;
  settings.force_global_route = true;
  QpStateMachine qp(settings);
  QpEndpoint local = ibEndpoint(1, 2, 7, IBV_MTU_4096);
  local.gid_index = 0;
  QpEndpoint remote = ibEndpoint(3, 4, 9, IBV_MTU_4096);
  remote.gid[0] = 0xfe;
  remote.gid[1] = 0x80;
  remote.gid[15] = 9;
  QpTransition t;
  ASSERT_TRUE(qp.toInit(local, &t).isOk());
  ASSERT_TRUE(qp.toRtr(local, remote, &t).isOk());
  EXPECT_EQ(t.attr.ah_attr.is_global, 1);
  EXPECT_EQ(t.attr.ah_attr.dlid, 9);
  EXPECT_EQ(t.attr.ah_attr.grh.dgid.raw[15], 9);
}

TEST(VerbsQpStateTest, OutOfOrderTransitionsAreRefused) {
  QpStateMachine qp;
  QpEndpoint local = ibEndpoint(1, 2, 7, IBV_MTU_4096);
  QpEndpoint remote = ibEndpoint(3, 4, 9, IBV_MTU_4096);
  QpTransition t;
  t.mask = -1;
  Status status = qp.toRtr(local, remote, &t);
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("to RTR from state RESET (expected INIT)"), std::string::npos)
      << status.toString();
  EXPECT_EQ(t.mask, -1) << "output written on failure";
  EXPECT_EQ(qp.state(), QpStateMachine::State::kReset);
  EXPECT_FALSE(qp.toRts(local, &t).isOk());
  ASSERT_TRUE(qp.toInit(local, &t).isOk());
  EXPECT_FALSE(qp.toInit(local, &t).isOk());
  EXPECT_FALSE(qp.toRts(local, &t).isOk());
  ASSERT_TRUE(qp.toRtr(local, remote, &t).isOk());
  EXPECT_FALSE(qp.toRtr(local, remote, &t).isOk());
  ASSERT_TRUE(qp.toRts(local, &t).isOk());
  EXPECT_FALSE(qp.toRts(local, &t).isOk());
  EXPECT_EQ(qp.state(), QpStateMachine::State::kRts);
  qp.toError(&t);
  EXPECT_EQ(t.mask, IBV_QP_STATE);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_ERR);
  EXPECT_EQ(qp.state(), QpStateMachine::State::kError);
  EXPECT_FALSE(qp.toInit(local, &t).isOk());
}

TEST(VerbsQpStateTest, BadPeersAreRefusedAtRtr) {
  QpEndpoint ib = ibEndpoint(1, 2, 7, IBV_MTU_4096);
  QpEndpoint roce = roceEndpoint(1, 2, 5, IBV_MTU_4096);
  QpTransition t;
  {
    QpStateMachine qp;
    ASSERT_TRUE(qp.toInit(ib, &t).isOk());
    Status status = qp.toRtr(ib, roce, &t);
    EXPECT_EQ(status.code(), StatusCode::kRemote);
    EXPECT_NE(status.message().find("peer's port is RoCE, ours is InfiniBand"), std::string::npos)
        << status.toString();
    EXPECT_EQ(qp.state(), QpStateMachine::State::kInit);
  }
  {
    QpStateMachine qp;
    ASSERT_TRUE(qp.toInit(ib, &t).isOk());
    QpEndpoint no_lid = ibEndpoint(1, 2, 0, IBV_MTU_4096);
    EXPECT_EQ(qp.toRtr(ib, no_lid, &t).code(), StatusCode::kRemote);
  }
  {
    QpStateMachine qp;
    ASSERT_TRUE(qp.toInit(roce, &t).isOk());
    QpEndpoint no_gid = roceEndpoint(1, 2, 0, IBV_MTU_4096);
    std::memset(no_gid.gid, 0, sizeof(no_gid.gid));
    Status status = qp.toRtr(roce, no_gid, &t);
    EXPECT_EQ(status.code(), StatusCode::kRemote);
    EXPECT_NE(status.message().find("no GID"), std::string::npos) << status.toString();
  }
}

}  // namespace
}  // namespace tally::transport::verbs
