// The varint codec of shared/docsync_wire.h, which both the plugin and the worker use.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "docsync_wire.h"

namespace {

std::vector<uint8_t> encode(uint64_t v) {
    std::vector<uint8_t> out(DOCSYNC_UV_MAX_BYTES);
    out.resize(docsync_uv_encode(v, out.data()));
    return out;
}

bool decode(const std::vector<uint8_t>& bytes, uint64_t& v, size_t& used) {
    const uint8_t* pos = bytes.data();
    if (!docsync_uv_decode(&pos, bytes.data() + bytes.size(), &v)) return false;
    used = static_cast<size_t>(pos - bytes.data());
    return true;
}

}  // namespace

TEST_CASE("uv round-trips the whole 64-bit range with the documented lengths") {
    const uint64_t values[] = {0, 1, 127, 128, 300, 16383, 16384, 0x16B3F28, 1ull << 35, std::numeric_limits<uint64_t>::max()};
    for (uint64_t v : values) {
        auto bytes = encode(v);
        uint64_t back = 0;
        size_t used = 0;
        REQUIRE(decode(bytes, back, used));
        CHECK(back == v);
        CHECK(used == bytes.size());
    }
    CHECK(encode(127).size() == 1);
    CHECK(encode(128).size() == 2);
    CHECK(encode(std::numeric_limits<uint64_t>::max()).size() == DOCSYNC_UV_MAX_BYTES);
}

TEST_CASE("uv decoding rejects truncated, over-long and overflowing input") {
    uint64_t v = 0;
    size_t used = 0;
    CHECK_FALSE(decode({}, v, used));
    CHECK_FALSE(decode({0x80}, v, used));                      // continuation with nothing after it
    CHECK_FALSE(decode(std::vector<uint8_t>(11, 0x80), v, used));  // longer than 10 bytes
    std::vector<uint8_t> overflow(9, 0xff);
    overflow.push_back(0x02);                                  // a bit beyond 64
    CHECK_FALSE(decode(overflow, v, used));
}

TEST_CASE("zigzag keeps small magnitudes small in both signs") {
    CHECK(docsync_zigzag_encode(0) == 0);
    CHECK(docsync_zigzag_encode(-1) == 1);
    CHECK(docsync_zigzag_encode(1) == 2);
    for (int64_t v : {int64_t{0}, int64_t{-5}, int64_t{5}, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()})
        CHECK(docsync_zigzag_decode(docsync_zigzag_encode(v)) == v);
}
