// SPDX-License-Identifier: Apache-2.0
// libfabric loaded at run time (transport/ofi/loader.h) and the ofi backend's wire format
// (transport/ofi/wire.h).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "transport/ofi/loader.h"
#include "transport/ofi/wire.h"

namespace tally::transport::ofi {
namespace {

// Read before main: whatever the binary links is loaded by then. Tally must not link libfabric.
const bool kFabricLoadedAtStart = [] {
  void* handle = dlopen(kFabricLibrary, RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}();

TEST(OfiLoader, TallyDoesNotLinkLibfabric) { EXPECT_FALSE(kFabricLoadedAtStart); }

TEST(OfiLoader, LoadsTheInstalledLibrary) {
  const FabricApi* api = nullptr;
  Status status = loadFabric(&api);
  if (!status.isOk()) GTEST_SKIP() << "libfabric not installed: " << status.toString();
  ASSERT_NE(api, nullptr);
  EXPECT_GE(api->version(), kMinApiVersion);
  EXPECT_LE(api->apiVersion(), FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION));
  EXPECT_LE(api->apiVersion(), api->version());
  // fi_strerror through the table: a real libfabric names its own codes.
  EXPECT_FALSE(std::string(api->strerror(FI_ENODATA)).empty());
  EXPECT_NE(api->errorText(-FI_ENODATA).find("(-61)"), std::string::npos);
  // Loaded once: the same table again.
  const FabricApi* again = nullptr;
  ASSERT_TRUE(loadFabric(&again).isOk());
  EXPECT_EQ(again, api);
}

TEST(OfiLoader, MissingLibraryIsInvalidUsageNamingIt) {
  std::unique_ptr<FabricApi> api;
  Status status = loadFabricFrom("libtally-no-such-fabric.so.1", &api);
  EXPECT_EQ(status.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(status.message().find("libtally-no-such-fabric.so.1 not found"), std::string::npos)
      << status.toString();
  EXPECT_EQ(api, nullptr);
}

TEST(OfiLoader, LibraryWithoutTheSymbolsIsInternalNamingTheSymbol) {
  // libm is on every glibc host and exports none of libfabric's functions.
  std::unique_ptr<FabricApi> api;
  Status status = loadFabricFrom("libm.so.6", &api);
  EXPECT_EQ(status.code(), StatusCode::kInternal);
  EXPECT_NE(status.message().find("fi_getinfo@FABRIC_1.3"), std::string::npos) << status.toString();
  EXPECT_EQ(api, nullptr);
}

TEST(OfiWire, TagsKeepControlChunkAndSequenceApart) {
  EXPECT_EQ(controlTag(5), kControlBit | 5);
  EXPECT_EQ(chunkTag(5, 0), 5u);
  EXPECT_EQ(chunkTag(5, 3), (3ull << kSeqBits) | 5);
  EXPECT_EQ(controlTag(kSeqMask + 2), controlTag(1));  // the sequence wraps
  EXPECT_NE(chunkTag(7, kMaxChunks - 1) & kControlBit, kControlBit);
  EXPECT_EQ(chunkTag(0, kMaxChunks - 1) >> 60, 0u);  // the top four bits stay clear
}

TEST(OfiWire, HeaderRoundTrips) {
  Header header;
  header.tag = -7;
  header.size = (1ull << 40) + 3;
  header.flags = kInline;
  header.chunks = 99;
  uint8_t bytes[kHeaderBytes];
  encodeHeader(header, bytes);
  EXPECT_EQ(bytes[0], 0x54);  // 'T', little-endian magic
  Header back = decodeHeader(bytes);
  EXPECT_EQ(back.magic, kHeaderMagic);
  EXPECT_EQ(back.tag, -7);
  EXPECT_EQ(back.size, (1ull << 40) + 3);
  EXPECT_EQ(back.flags, kInline);
  EXPECT_EQ(back.chunks, 99u);
}

TEST(OfiWire, SetupRoundTripsAndRejectsGarbage) {
  SetupMessage setup;
  setup.provider = "tcp;ofi_rxm";
  setup.max_chunk = 1u << 30;
  setup.slot_bytes = 4096;
  setup.no_inline = true;
  setup.endpoint = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  std::vector<uint8_t> bytes = encodeSetup(setup);
  SetupMessage back;
  ASSERT_TRUE(decodeSetup(bytes, "peer", &back).isOk());
  EXPECT_EQ(back.provider, setup.provider);
  EXPECT_EQ(back.max_chunk, setup.max_chunk);
  EXPECT_EQ(back.slot_bytes, setup.slot_bytes);
  EXPECT_TRUE(back.no_inline);
  EXPECT_EQ(back.endpoint, setup.endpoint);
  setup.no_inline = false;
  ASSERT_TRUE(decodeSetup(encodeSetup(setup), "peer", &back).isOk());
  EXPECT_FALSE(back.no_inline);
  // A version 1 peer (no no-inline byte): its version is named, not "malformed".
  std::vector<uint8_t> v1 = encodeSetup(setup);
  v1.erase(v1.begin() + 4 + 2 + 2 + 8 + 4);
  v1[4] = 1;
  v1[5] = 0;
  Status status = decodeSetup(v1, "peer", &back);
  EXPECT_NE(status.message().find("wire version 1, this end 2"), std::string::npos)
      << status.toString();
  std::vector<uint8_t> bad_flag = encodeSetup(setup);
  bad_flag[4 + 2 + 2 + 8 + 4] = 2;  // the no-inline byte is 0 or 1
  EXPECT_FALSE(decodeSetup(bad_flag, "peer", &back).isOk());

  std::vector<uint8_t> shorter(bytes.begin(), bytes.end() - 1);
  status = decodeSetup(shorter, "10.0.0.9:1", &back);
  EXPECT_EQ(status.code(), StatusCode::kRemote);
  EXPECT_NE(status.message().find("10.0.0.9:1"), std::string::npos);
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_FALSE(decodeSetup(longer, "peer", &back).isOk());
  std::vector<uint8_t> other_version = bytes;
  other_version[4] = 9;
  status = decodeSetup(other_version, "peer", &back);
  EXPECT_NE(status.message().find("version 9"), std::string::npos) << status.toString();
  setup.slot_bytes = kHeaderBytes;  // no room for anything inline: refused
  EXPECT_FALSE(decodeSetup(encodeSetup(setup), "peer", &back).isOk());
}

TEST(OfiWire, FarewellAndChunkCount) {
  uint64_t sent = 0;
  ASSERT_TRUE(decodeFarewell(encodeFarewell(123456789012ull), &sent));
  EXPECT_EQ(sent, 123456789012ull);
  EXPECT_FALSE(decodeFarewell({1, 2, 3}, &sent));
  EXPECT_EQ(chunkCount(0, 100), 0u);
  EXPECT_EQ(chunkCount(1, 100), 1u);
  EXPECT_EQ(chunkCount(100, 100), 1u);
  EXPECT_EQ(chunkCount(101, 100), 2u);
}

}  // namespace
}  // namespace tally::transport::ofi
