// The Redis client's reply kinds and failures, without a server: replies read by hiredis's own reader
// from RESP text, each failure factory's retry class, and messages that name no program's setting.
#include <doctest/doctest.h>

#include <string>

#include "redis/connection.hpp"
#include "redis/reply.hpp"
#include "resp_text.hpp"

using namespace docsync::redis;
using docsync::test::read_resp;

namespace {

template <typename F>
docsync::Error error_of(F&& f) {
    try {
        f();
    } catch (const docsync::Error& e) {
        return e;
    }
    FAIL("no error");
    return docsync::Error("");
}

}  // namespace

TEST_CASE("redis replies: each RESP2 reply has its kind, and a missing one is Missing") {
    CHECK(kind_of(nullptr) == ReplyKind::Missing);
    CHECK(kind_of(read_resp("+OK\r\n")) == ReplyKind::Status);
    CHECK(kind_of(read_resp("-ERR unknown command\r\n")) == ReplyKind::Error);
    CHECK(kind_of(read_resp("$3\r\nabc\r\n")) == ReplyKind::String);
    CHECK(kind_of(read_resp(":42\r\n")) == ReplyKind::Integer);
    CHECK(kind_of(read_resp("$-1\r\n")) == ReplyKind::Nil);
    CHECK(kind_of(read_resp("*1\r\n:1\r\n")) == ReplyKind::Array);
    CHECK(reply_text(nullptr) == "no reply");
    CHECK(reply_text(read_resp("-NOAUTH Authentication required.\r\n").get()) == "NOAUTH Authentication required.");
}

TEST_CASE("redis replies: an error's code is its whole first word") {
    Reply noscript = read_resp("-NOSCRIPT No matching script. Please use EVAL.\r\n");
    CHECK(is_error(noscript));
    CHECK(is_error(noscript, "NOSCRIPT"));
    CHECK_FALSE(is_error(noscript, "NO"));
    CHECK_FALSE(is_error(noscript, "NOSCRIPTS"));
    CHECK(is_error(read_resp("-MOVED 3999 127.0.0.1:6381\r\n"), "MOVED"));
    CHECK(is_error(read_resp("-LOADING\r\n"), "LOADING"));
    // A string that reads like an error is not one.
    Reply text = read_resp("$8\r\nNOSCRIPT\r\n");
    CHECK_FALSE(is_error(text));
    CHECK_FALSE(is_error(text, "NOSCRIPT"));
    CHECK_FALSE(is_error(nullptr));
}

TEST_CASE("redis failures: unreachable and refused are retried, misconfigured is not") {
    CHECK(unreachable("Redis at h:1/0: connection lost").transient());
    CHECK(refused("AUTH failed on Redis at h:1/0").transient());
    CHECK_FALSE(misconfigured("Redis at h:1 is not a Redis Cluster node").transient());
    CHECK(std::string(misconfigured("x").what()) == "x");
    // A malformed URL is the address's fault, and the client names no program's setting: the
    // worker says --sink, the gateway --redis.
    docsync::Error bad = error_of([] { parse_redis_url("redis://h:abc"); });
    CHECK_FALSE(bad.transient());
    CHECK(std::string(bad.what()).rfind("the port 'abc' is not 1-65535; expected redis://", 0) == 0);
    docsync::Error cluster = error_of([] { parse_redis_cluster_url("redis-cluster://10.0.0.1"); });
    CHECK(std::string(cluster.what()).find("--sink") == std::string::npos);
}
