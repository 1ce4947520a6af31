// The --sink factory.
#include "publish/sink.hpp"

#include "common/error.hpp"
#include "publish/jsonl_sink.hpp"
#include "publish/redis_cluster_sink.hpp"

namespace docsync::publish {

namespace {

// The Redis client's errors name no program's setting; the worker's say "--sink VALUE: …" for a
// malformed value and "--sink: …" for a server that refuses (the value holds the password).
Error naming_sink(const Error& e, std::string_view value = {}) {
    std::string what = e.what();
    if (what.rfind("--sink", 0) == 0) return e;
    std::string prefix = value.empty() ? "--sink: " : "--sink " + std::string(value) + ": ";
    return Error(prefix + what, {}, e.transient());
}

}  // namespace

SinkSpec parse_sink(std::string_view value) {
    SinkSpec spec;
    if (value == "stdout") {
        spec.kind = SinkSpec::Kind::Stdout;
    } else if (value.substr(0, 5) == "file:") {
        spec.kind = SinkSpec::Kind::File;
        spec.path = std::string(value.substr(5));
        if (spec.path.empty())
            throw Error("--sink file: needs a path after 'file:', as in --sink file:/var/lib/docsync/docs.jsonl");
    } else if (value.substr(0, 8) == "redis://") {
        spec.kind = SinkSpec::Kind::Redis;
        try {
            spec.redis = parse_redis_url(value);
        } catch (const Error& e) {
            throw naming_sink(e, value);
        }
    } else if (value.substr(0, 16) == "redis-cluster://") {
        spec.kind = SinkSpec::Kind::RedisCluster;
        try {
            spec.cluster = parse_redis_cluster_url(value);
        } catch (const Error& e) {
            throw naming_sink(e, value);
        }
    } else {
        throw Error("unknown --sink '" + std::string(value) +
                    "': use stdout, file:PATH (JSON lines in a file), redis://HOST:PORT[/DB] or "
                    "redis-cluster://HOST:PORT[,HOST:PORT...]");
    }
    return spec;
}

std::string SinkSpec::display() const {
    switch (kind) {
        case Kind::Stdout: return "stdout";
        case Kind::File: return "the file " + path;
        case Kind::Redis: return "Redis at " + redis.display();
        case Kind::RedisCluster: return cluster.display();
    }
    return "the sink";
}

std::unique_ptr<Publisher> make_publisher(const SinkSpec& spec, const RedisSinkOptions& redis_options,
                                          std::shared_ptr<Patcher> patcher) {
    RedisSinkOptions options = redis_options;
    if (patcher) options.patcher = patcher;
    switch (spec.kind) {
        case SinkSpec::Kind::Stdout: return JsonlSink::open_stdout(1, patcher);
        case SinkSpec::Kind::File: return JsonlSink::open_file(spec.path, patcher);
        case SinkSpec::Kind::Redis: return std::make_unique<RedisSink>(spec.redis, options);
        case SinkSpec::Kind::RedisCluster:
            try {
                return std::make_unique<RedisClusterSink>(spec.cluster, options);
            } catch (const Error& e) {
                throw naming_sink(e);
            }
    }
    throw Error("unknown sink kind");
}

std::unique_ptr<RedisLiveness> make_liveness(const SinkSpec& spec, LivenessCallbacks callbacks,
                                             LivenessOptions options) {
    if (!spec.is_redis())
        throw Error("--live subscribers needs a Redis sink (--sink redis://HOST:PORT or redis-cluster://...): only "
                    "Redis knows who subscribes; with a JSONL sink use --live all");
    if (spec.kind == SinkSpec::Kind::RedisCluster)
        return std::make_unique<RedisLiveness>(spec.cluster, std::move(callbacks), options);
    return std::make_unique<RedisLiveness>(spec.redis, std::move(callbacks), options);
}

}  // namespace docsync::publish
