// Hand-built pgoutput messages for the decoder's unit tests (pgoutput_decoder_test.cpp, protocol
// version 1; pgoutput_stream_test.cpp, version 2): big-endian integers, NUL-terminated strings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replication/pgoutput_decoder.hpp"

namespace docsync::testing {

struct Msg {
    std::vector<std::uint8_t> b;
    Msg& u8(std::uint8_t v) { b.push_back(v); return *this; }
    Msg& be(std::uint64_t v, int bytes) {
        for (int i = bytes - 1; i >= 0; --i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
        return *this;
    }
    Msg& i16(std::uint16_t v) { return be(v, 2); }
    Msg& i32(std::uint32_t v) { return be(v, 4); }
    Msg& i64(std::uint64_t v) { return be(v, 8); }
    Msg& cstr(const std::string& s) { b.insert(b.end(), s.begin(), s.end()); b.push_back(0); return *this; }
    Msg& text(const std::string& s) { u8('t').i32(static_cast<std::uint32_t>(s.size())); b.insert(b.end(), s.begin(), s.end()); return *this; }
};

// The relations the tests' messages name.
constexpr Oid kOrders = 16384;
constexpr Oid kOther = 16400;

}  // namespace docsync::testing
