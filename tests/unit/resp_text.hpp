#pragma once
// Redis replies without a server, for the unit tests of the Redis client and sinks: RESP text read
// by hiredis's own reader into the Reply the client hands out.
#include <doctest/doctest.h>
#include <hiredis/hiredis.h>

#include <string>

#include "redis/reply.hpp"

namespace docsync::test {

inline redis::Reply read_resp(const std::string& resp) {
    redisReader* reader = redisReaderCreate();
    REQUIRE(redisReaderFeed(reader, resp.data(), resp.size()) == REDIS_OK);
    void* raw = nullptr;
    REQUIRE(redisReaderGetReply(reader, &raw) == REDIS_OK);
    redisReaderFree(reader);
    REQUIRE(raw != nullptr);
    return redis::Reply(static_cast<redisReply*>(raw));
}

// A bulk string's RESP.
inline std::string bulk(const std::string& s) { return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n"; }

}  // namespace docsync::test
