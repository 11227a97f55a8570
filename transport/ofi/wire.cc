// SPDX-License-Identifier: Apache-2.0
#include "transport/ofi/wire.h"

namespace tally::transport::ofi {
namespace {

void put(std::vector<uint8_t>* out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out->push_back(static_cast<uint8_t>(value >> (8 * i)));
}

void putAt(uint8_t* out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t getAt(const uint8_t* in, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

// Reads fixed-size fields in order, remembering whether it ran past the end.
class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  uint64_t get(size_t bytes) {
    if (!take(bytes)) return 0;
    return getAt(bytes_.data() + offset_ - bytes, bytes);
  }
  const uint8_t* raw(size_t bytes) {
    if (!take(bytes)) return nullptr;
    return bytes_.data() + offset_ - bytes;
  }
  bool ok() const { return ok_; }
  bool atEnd() const { return offset_ == bytes_.size(); }

 private:
  bool take(size_t bytes) {
    if (!ok_ || bytes > bytes_.size() - offset_) {
      ok_ = false;
      return false;
    }
    offset_ += bytes;
    return true;
  }
  const std::vector<uint8_t>& bytes_;
  size_t offset_ = 0;
  bool ok_ = true;
};

}  // namespace

void encodeHeader(const Header& header, uint8_t out[kHeaderBytes]) {
  putAt(out, header.magic, 4);
  putAt(out + 4, static_cast<uint32_t>(header.tag), 4);
  putAt(out + 8, header.size, 8);
  putAt(out + 16, header.flags, 4);
  putAt(out + 20, header.chunks, 4);
}

Header decodeHeader(const uint8_t in[kHeaderBytes]) {
  Header header;
  header.magic = static_cast<uint32_t>(getAt(in, 4));
  header.tag = static_cast<int32_t>(static_cast<uint32_t>(getAt(in + 4, 4)));
  header.size = getAt(in + 8, 8);
  header.flags = static_cast<uint32_t>(getAt(in + 16, 4));
  header.chunks = static_cast<uint32_t>(getAt(in + 20, 4));
  return header;
}

std::vector<uint8_t> encodeSetup(const SetupMessage& setup) {
  std::vector<uint8_t> out;
  put(&out, kSetupMagic, 4);
  put(&out, kWireVersion, 2);
  put(&out, setup.provider.size(), 2);
  put(&out, setup.max_chunk, 8);
  put(&out, setup.slot_bytes, 4);
  put(&out, setup.no_inline ? 1 : 0, 1);
  put(&out, setup.endpoint.size(), 2);
  out.insert(out.end(), setup.provider.begin(), setup.provider.end());
  out.insert(out.end(), setup.endpoint.begin(), setup.endpoint.end());
  return out;
}

Status decodeSetup(const std::vector<uint8_t>& bytes, const std::string& peer, SetupMessage* out) {
  Reader reader(bytes);
  const uint64_t magic = reader.get(4);
  const uint64_t version = reader.get(2);
  // The version first: another version's setup has other fields, so its length proves nothing.
  if (reader.ok() && magic == kSetupMagic && version != kWireVersion) {
    return Status::remote("peer " + peer + " speaks ofi wire version " + std::to_string(version) +
                          ", this end " + std::to_string(kWireVersion) +
                          ": run the same Tally version everywhere");
  }
  const size_t provider_length = reader.get(2);
  SetupMessage setup;
  setup.max_chunk = reader.get(8);
  setup.slot_bytes = static_cast<uint32_t>(reader.get(4));
  const uint64_t no_inline = reader.get(1);
  setup.no_inline = no_inline == 1;
  const size_t endpoint_length = reader.get(2);
  const uint8_t* provider = reader.raw(provider_length);
  const uint8_t* endpoint = reader.raw(endpoint_length);
  if (!reader.ok() || !reader.atEnd() || magic != kSetupMagic || no_inline > 1) {
    return Status::remote("peer " + peer + " sent a malformed ofi setup (" +
                          std::to_string(bytes.size()) + " bytes)");
  }
  if (setup.max_chunk == 0 || setup.slot_bytes <= kHeaderBytes) {
    return Status::remote("peer " + peer + " sent an ofi setup with a zero chunk or slot size");
  }
  setup.provider.assign(reinterpret_cast<const char*>(provider), provider_length);
  setup.endpoint.assign(endpoint, endpoint + endpoint_length);
  *out = std::move(setup);
  return Status::ok();
}

std::vector<uint8_t> encodeFarewell(uint64_t messages_sent) {
  std::vector<uint8_t> out;
  put(&out, messages_sent, 8);
  return out;
}

bool decodeFarewell(const std::vector<uint8_t>& bytes, uint64_t* messages_sent) {
  if (bytes.size() != 8) return false;
  *messages_sent = getAt(bytes.data(), 8);
  return true;
}

uint64_t chunkCount(uint64_t size, uint64_t max_chunk) {
  if (size == 0) return 0;
  return (size + max_chunk - 1) / max_chunk;
}

}  // namespace tally::transport::ofi
