// SPDX-License-Identifier: Apache-2.0
// The building blocks: CRC32C known answers (ISA-L's conventions), the job token's MAC
// construction checked against libcrypto's HMAC, token loading, the opening helpers, and the
// plugin passing the new variables to its CollNet options.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/auth.h"
#include "common/crc32c.h"
#include "common/params.h"
#include "plugin/state.h"
#include "protocol/opening.h"

namespace tally {
namespace {

// Bitwise CRC-32C (reflected polynomial 0x82F63B78), the reference for the library.
uint32_t referenceCrc32c(const uint8_t* p, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return crc ^ 0xFFFFFFFFu;
}

const crc32c::Crc32c& crc() {
  Status why;
  const crc32c::Crc32c* c = crc32c::shared(&why);
  if (c == nullptr) {
    ADD_FAILURE() << why.toString();
    std::abort();
  }
  return *c;
}

TEST(Crc32cTest, StandardCheckValue) {
  // The CRC-32C catalogue's check value: ISA-L's crc32_iscsi needs the initial and final
  // inversions done outside it, which the wrapper does.
  const char* text = "123456789";
  EXPECT_EQ(crc().compute(text, 9), 0xE3069283u);
  EXPECT_EQ(crc().compute(text, 0), 0u);
}

TEST(Crc32cTest, Rfc3720Vectors) {
  // iSCSI's own examples (RFC 3720, B.4).
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<uint8_t>(i);
    down[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(crc().compute(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc().compute(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc().compute(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc().compute(down.data(), 32), 0x113FDB5Cu);
}

TEST(Crc32cTest, MatchesBitwiseReferenceAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::vector<uint8_t> data(70000);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  for (size_t len : {1u, 2u, 3u, 7u, 8u, 15u, 16u, 63u, 64u, 255u, 1000u, 4096u, 65536u, 69990u}) {
    for (size_t off : {0u, 1u, 3u, 7u}) {
      EXPECT_EQ(crc().compute(data.data() + off, len), referenceCrc32c(data.data() + off, len))
          << "length " << len << " offset " << off;
    }
  }
  // One flipped bit changes it.
  const uint32_t before = crc().compute(data.data(), 65536);
  data[12345] ^= 0x10;
  EXPECT_NE(crc().compute(data.data(), 65536), before);
}

TEST(Crc32cTest, MissingLibraryNamesThePackage) {
  crc32c::Crc32c c;
  Status st = crc32c::Crc32c::open("libisal-not-here.so.99", &c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(st.message().find("libisal2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("TALLY_CHECKSUM=1"), std::string::npos) << st.message();
}

auth::Nonce nonceOf(uint8_t seed) {
  auth::Nonce n;
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(seed + 3 * i);
  return n;
}

TEST(AuthTest, MacIsHmacSha256OverLabelRoleAndBothNonces) {
  const std::string secret = "correct horse battery staple";
  auth::JobToken token(secret);
  const auth::Nonce r = nonceOf(1), w = nonceOf(100);
  for (auth::Role role : {auth::Role::kWorker, auth::Role::kReducer}) {
    std::vector<uint8_t> msg = {'t', 'a', 'l', 'l', 'y', '-', 'a', 'u', 't', 'h', '-', 'v', '3', 0};
    msg.push_back(static_cast<uint8_t>(role));
    msg.insert(msg.end(), r.begin(), r.end());
    msg.insert(msg.end(), w.begin(), w.end());
    uint8_t want[32];
    unsigned int len = 0;
    ASSERT_NE(HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg.data(),
                   msg.size(), want, &len),
              nullptr);
    ASSERT_EQ(len, 32u);
    const auth::Mac got = token.prove(role, r, w);
    EXPECT_EQ(std::memcmp(got.data(), want, 32), 0);
    EXPECT_TRUE(token.verify(role, r, w, got));
  }
}

TEST(AuthTest, VerifyRefusesEveryChange) {
  auth::JobToken token("s3cret-token-for-the-job");
  const auth::Nonce r = nonceOf(1), w = nonceOf(100);
  const auth::Mac mac = token.prove(auth::Role::kWorker, r, w);
  EXPECT_TRUE(token.verify(auth::Role::kWorker, r, w, mac));
  EXPECT_FALSE(token.verify(auth::Role::kReducer, r, w, mac));  // the other direction
  EXPECT_FALSE(token.verify(auth::Role::kWorker, w, r, mac));   // nonces swapped
  EXPECT_FALSE(token.verify(auth::Role::kWorker, nonceOf(2), w, mac));
  EXPECT_FALSE(auth::JobToken("s3cret-token-for-the-joB").verify(auth::Role::kWorker, r, w, mac));
  auth::Mac bad = mac;
  bad[31] ^= 1;
  EXPECT_FALSE(token.verify(auth::Role::kWorker, r, w, bad));
  EXPECT_FALSE(auth::JobToken().verify(auth::Role::kWorker, r, w, mac));  // no token
}

TEST(AuthTest, RandomBytesDiffer) {
  auth::Nonce a, b;
  ASSERT_TRUE(auth::randomBytes(a.data(), a.size()).isOk());
  ASSERT_TRUE(auth::randomBytes(b.data(), b.size()).isOk());
  EXPECT_NE(a, b);
}

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tally-token-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const auto& f : files_) ::unlink(f.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string write(const std::string& name, const std::string& text, mode_t mode) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    files_.push_back(path);
    return path;
  }
  std::string dir_;
  std::vector<std::string> files_;
};

TEST_F(TokenFileTest, FileValueAndErrors) {
  const std::string secret = "0123456789abcdef0123456789abcdef";
  auth::JobToken from_file, from_value;
  ASSERT_TRUE(auth::loadJobToken("", write("t", secret + "\n", 0600), &from_file).isOk());
  ASSERT_TRUE(auth::loadJobToken(secret, "", &from_value).isOk());
  const auth::Nonce r = nonceOf(9), w = nonceOf(90);
  // The final newline is not part of the token: both prove the same.
  EXPECT_TRUE(
      from_value.verify(auth::Role::kWorker, r, w, from_file.prove(auth::Role::kWorker, r, w)));
  // Group-readable still loads (mounted secrets often are), with a warning.
  auth::JobToken loose;
  EXPECT_TRUE(auth::loadJobToken("", write("loose", secret, 0644), &loose).isOk());
  EXPECT_FALSE(loose.empty());

  auth::JobToken none;
  ASSERT_TRUE(auth::loadJobToken("", "", &none).isOk());
  EXPECT_TRUE(none.empty());

  auth::JobToken out;
  Status st = auth::loadJobToken(secret, write("both", secret, 0600), &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(st.message().find("only one"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find(secret), std::string::npos) << "the secret leaked into an error";
  st = auth::loadJobToken("", write("empty", "\n", 0600), &out);
  EXPECT_NE(st.message().find("is empty"), std::string::npos) << st.message();
  st = auth::loadJobToken("", dir_ + "/missing", &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(st.message().find(dir_ + "/missing"), std::string::npos) << st.message();
  EXPECT_TRUE(out.empty()) << "output written on failure";
}

TEST(OpeningTest, BothSidesAgreeOnlyWithTheSameToken) {
  auth::JobToken reducer_token("the-jobs-shared-secret-value");
  for (const std::string& worker_secret :
       {std::string("the-jobs-shared-secret-value"), std::string("another-jobs-secret-value")}) {
    protocol::opening::ReducerSide rs;
    ASSERT_TRUE(protocol::opening::ReducerSide::start(&reducer_token, &rs).isOk());
    const protocol::wire::Frame challenge = rs.challenge();
    auth::JobToken worker_token(worker_secret);
    protocol::opening::WorkerSide ws(&worker_token, "reducer0");
    bool send = false;
    protocol::wire::Frame answer, proof;
    std::string reject;
    ASSERT_TRUE(ws.onChallenge(challenge.data(), challenge.size, &send, &answer, &reject).isOk());
    ASSERT_TRUE(send);
    Status st = rs.checkAnswer(answer.data(), answer.size, &proof);
    if (worker_secret == "the-jobs-shared-secret-value") {
      ASSERT_TRUE(st.isOk()) << st.toString();
      EXPECT_TRUE(ws.checkProof(proof.data(), proof.size).isOk());
    } else {
      EXPECT_FALSE(st.isOk());
      EXPECT_EQ(st.message().rfind("authentication failed", 0), 0u) << st.message();
      EXPECT_EQ(st.message().find(worker_secret), std::string::npos);
    }
  }
}

TEST(PluginParamsTest, TokenAndChecksumReachTheCollNetOptions) {
  MapParamSource source({{"TALLY_JOB_TOKEN", "job-secret-from-env-0123"},
                         {"TALLY_JOB_TOKEN_FILE", "/run/secrets/tally"},
                         {"TALLY_CHECKSUM", "1"}});
  Params params;
  ASSERT_TRUE(Params::load(source, &params).isOk());
  EXPECT_EQ(params.jobToken, "job-secret-from-env-0123");
  EXPECT_TRUE(params.checksum);
  plugin::PluginState state(params, {});
  EXPECT_EQ(state.collOptions().job_token, "job-secret-from-env-0123");
  EXPECT_EQ(state.collOptions().job_token_file, "/run/secrets/tally");
  EXPECT_TRUE(state.collOptions().checksum);
  EXPECT_FALSE(Params::defaults().checksum);
  EXPECT_TRUE(isSecretParam("TALLY_JOB_TOKEN"));
  EXPECT_FALSE(isSecretParam("TALLY_JOB_TOKEN_FILE"));
}

}  // namespace
}  // namespace tally
