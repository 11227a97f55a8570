// SPDX-License-Identifier: Apache-2.0
// The run-time libcrypto loader (common/hmac_sha256.h) and when the job token loads it.
//
// This binary links no libcrypto, and ctest runs each test in a process of its own, so
// /proc/self/maps shows exactly what the code under test loaded.
#include "common/hmac_sha256.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/auth.h"

namespace tally {
namespace {

std::string hex(const hmac::Digest& d) {
  static const char* const kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

bool libcryptoMapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/libcrypto.so") != std::string::npos) return true;
  }
  return false;
}

TEST(HmacSha256, MissingLibraryIsAClearError) {
  hmac::HmacSha256 h;
  Status st = hmac::HmacSha256::open("libtally-no-such-crypto.so.3", &h);
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(st.message().find("libtally-no-such-crypto.so.3 cannot be loaded"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("libssl3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("job token"), std::string::npos) << st.message();
}

TEST(HmacSha256, LibraryWithoutTheFunctionsNamesTheMissingOne) {
  hmac::HmacSha256 h;
  Status st = hmac::HmacSha256::open("libm.so.6", &h);  // loads, but is not libcrypto
  EXPECT_EQ(st.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(st.message().find("needs HMAC"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("libm.so.6 has none"), std::string::npos) << st.message();
}

// RFC 4231, test cases 1 and 2: the loaded functions compute HMAC-SHA256 itself.
TEST(HmacSha256, MatchesRfc4231) {
  Status why;
  const hmac::HmacSha256* h = hmac::shared(&why);
  ASSERT_NE(h, nullptr) << why.toString();
  hmac::Digest d{};
  const std::string key1(20, '\x0b');
  ASSERT_TRUE(h->compute(key1.data(), key1.size(), "Hi There", 8, &d).isOk());
  EXPECT_EQ(hex(d), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const std::string msg2 = "what do ya want for nothing?";
  ASSERT_TRUE(h->compute("Jefe", 4, msg2.data(), msg2.size(), &d).isOk());
  EXPECT_EQ(hex(d), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(libcryptoMapped());
}

TEST(HmacSha256, NoTokenLoadsNoLibcrypto) {
  ASSERT_FALSE(libcryptoMapped()) << "this test binary must not link libcrypto";
  auth::JobToken none;
  ASSERT_TRUE(auth::loadJobToken("", "", &none).isOk());
  EXPECT_TRUE(none.empty());
  auth::Nonce n{};
  ASSERT_TRUE(auth::randomBytes(n.data(), n.size()).isOk());
  EXPECT_FALSE(libcryptoMapped()) << "libcrypto was loaded without a job token";

  auth::JobToken token;
  ASSERT_TRUE(auth::loadJobToken("a-job-token-of-enough-length", "", &token).isOk());
  EXPECT_TRUE(libcryptoMapped()) << "a job token loads libcrypto at once";
  EXPECT_TRUE(token.verify(auth::Role::kWorker, n, n, token.prove(auth::Role::kWorker, n, n)));
}

TEST(RandomBytes, FillsLargeAndEmptyBuffers) {
  // Over getrandom's 32 MiB per call, so the loop must take more than one piece.
  std::string a(40u << 20, '\0'), b(40u << 20, '\0');
  ASSERT_TRUE(auth::randomBytes(a.data(), a.size()).isOk());
  ASSERT_TRUE(auth::randomBytes(b.data(), b.size()).isOk());
  EXPECT_NE(a, b);
  EXPECT_NE(a.substr(a.size() - 64), std::string(64, '\0')) << "the tail was not filled";
  EXPECT_TRUE(auth::randomBytes(nullptr, 0).isOk());
}

}  // namespace
}  // namespace tally
