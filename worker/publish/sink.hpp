#pragma once
// Building a sink from the `--sink` value, and the liveness source that goes with it.
//   --sink stdout                       JSONL on standard output
//   --sink file:PATH                    JSONL in PATH, fsync'd (group commit), repaired at start
//   --sink redis://HOST:PORT[/DB]       retained + published in Redis (publish/redis_sink.hpp)
//   --sink redis-cluster://HOST:PORT[,HOST:PORT…]
//                                       the same over a Redis Cluster (publish/redis_cluster_sink.hpp)

#include <memory>
#include <string>
#include <string_view>

#include "engine/seams.hpp"
#include "publish/liveness.hpp"
#include "redis/connection.hpp"
#include "publish/redis_sink.hpp"

namespace docsync::publish {

struct SinkSpec {
    enum class Kind { Stdout, File, Redis, RedisCluster };
    Kind kind = Kind::Stdout;
    std::string path;             // File
    RedisAddress redis;           // Redis
    RedisClusterAddress cluster;  // RedisCluster
    bool is_redis() const { return kind == Kind::Redis || kind == Kind::RedisCluster; }
    // For messages: stdout, the file PATH, Redis at HOST:PORT/DB, Redis Cluster via HOST:PORT,…
    std::string display() const;
};

// Parses a --sink value. Throws docsync::Error naming the value and listing the accepted forms.
SinkSpec parse_sink(std::string_view value);

// Opens the sink: throws docsync::Error with the cause and the fix when it cannot be used (a file on
// a read-only or full path, Redis unreachable).
// `patcher` (--patches on, else null) is the cache of last-published docs the sink makes patches
// from, for every sink kind (publish/patcher.hpp).
std::unique_ptr<Publisher> make_publisher(const SinkSpec& spec, const RedisSinkOptions& redis_options = {},
                                          std::shared_ptr<Patcher> patcher = nullptr);

// What Redis clients ask for: with `options.poll_subscribers` the subscriber set of `--live
// subscribers`, and in both modes the docs asked for on docsync:warm and docsync:touch. Only a Redis
// sink has clients to ask: throws docsync::Error saying so for any other sink. Not started: call
// start().
std::unique_ptr<RedisLiveness> make_liveness(const SinkSpec& spec, LivenessCallbacks callbacks,
                                             LivenessOptions options = {});

}  // namespace docsync::publish
