#pragma once
// RAII over one synchronous hiredis connection, and the `redis://` address of the sink.
// A connection belongs to one thread at a time; after any I/O error it is dead and is thrown away.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "redis/reply.hpp"

namespace docsync::redis {

// Parameters both URL forms take after `?`, joined with `&`:
//   tombstone-ttl=SECONDS  how long a null doc's tombstone is kept (default 86400)
//   wait-replicas=N        a doc counts as published only once N replicas of its Redis have it (WAIT)
//   wait-timeout=MS        how long WAIT waits for them (default 1000); fewer fail the publish, retried
// redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?PARAMETERS]
struct RedisAddress {
    std::string host = "127.0.0.1";
    int port = 6379;
    int db = 0;
    std::string user;                       // AUTH user (Redis 6 ACLs); empty: the default user
    std::string password;                   // empty: no AUTH
    std::chrono::seconds tombstone_ttl{86400};  // how long a null doc's tombstone is kept
    int wait_replicas = 0;                      // 0: the master's answer is enough
    std::chrono::milliseconds wait_timeout{1000};
    std::string display() const;            // host:port/db, never the password
};

// redis-cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…][?PARAMETERS]: the seed nodes of a Redis
// Cluster (any node will do; several let the worker start while one is down).
struct RedisClusterAddress {
    std::vector<RedisAddress> seeds;  // each with the URL's credentials and parameters, database 0
    std::chrono::seconds tombstone_ttl{86400};
    int wait_replicas = 0;
    std::chrono::milliseconds wait_timeout{1000};
    std::string display() const;  // Redis Cluster via host:port,…; never the password
};

// Throw docsync::Error naming the problem and the expected form when `url` is malformed.
RedisAddress parse_redis_url(std::string_view url);
RedisClusterAddress parse_redis_cluster_url(std::string_view url);

class RedisConnection {
public:
    // Connects, authenticates and selects the database within `timeout`; every later command waits at
    // most `command_timeout` for its reply. Throws docsync::Error (transient) on failure.
    static std::unique_ptr<RedisConnection> connect(const RedisAddress& address, std::chrono::milliseconds timeout,
                                                    std::chrono::milliseconds command_timeout);

    // Sends one command (binary-safe arguments) and returns its reply, which may be an error reply.
    // Throws docsync::Error (transient) on I/O failure or timeout; the connection is dead afterwards.
    Reply command(const std::vector<std::string_view>& args);
    // Sends the commands at once and returns their replies in order (pipelining: one round trip).
    // Throws as command does; the connection is dead afterwards.
    std::vector<Reply> pipeline(const std::vector<std::vector<std::string_view>>& commands);
    // pipeline() in two halves, so that one thread can have commands in flight on several
    // connections at once: send() writes them all out, receive() reads that many replies.
    void send(const std::vector<std::vector<std::string_view>>& commands);
    std::vector<Reply> receive(std::size_t count);

    // For the subscriber's poll() loop.
    redisContext* context() { return ctx_.get(); }

private:
    // The I/O failure the context reports, as a transient error naming the server.
    Error io_error() const;
    explicit RedisConnection(redisContext* ctx, std::string where) : ctx_(ctx, &redisFree), where_(std::move(where)) {}
    std::unique_ptr<redisContext, decltype(&redisFree)> ctx_;
    std::string where_;
};

// Why a WAIT reply falls short of `address.wait_replicas`, for the publish's error.
std::string wait_shortfall(const Reply& wait, const RedisAddress& address);

}  // namespace docsync::redis

// The publish sinks and the gateway name the client's parts publish::…, as before its move here.
namespace docsync::publish {
using namespace docsync::redis;
}
