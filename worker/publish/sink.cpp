// The --sink factory.
#include "publish/sink.hpp"

#include "common/error.hpp"
#include "publish/jsonl_sink.hpp"

namespace docsync::publish {

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
        spec.redis = parse_redis_url(value);
    } else {
        throw Error("unknown --sink '" + std::string(value) +
                    "': use stdout, file:PATH (JSON lines in a file) or redis://HOST:PORT[/DB]");
    }
    return spec;
}

std::unique_ptr<Publisher> make_publisher(const SinkSpec& spec, const RedisSinkOptions& redis_options) {
    switch (spec.kind) {
        case SinkSpec::Kind::Stdout: return JsonlSink::open_stdout();
        case SinkSpec::Kind::File: return JsonlSink::open_file(spec.path);
        case SinkSpec::Kind::Redis: return std::make_unique<RedisSink>(spec.redis, redis_options);
    }
    throw Error("unknown sink kind");
}

std::unique_ptr<RedisLiveness> make_liveness(const SinkSpec& spec, LivenessCallbacks callbacks,
                                             LivenessOptions options) {
    if (spec.kind != SinkSpec::Kind::Redis)
        throw Error("--live subscribers needs a Redis sink (--sink redis://HOST:PORT): only Redis knows who "
                    "subscribes; with a JSONL sink use --live all");
    return std::make_unique<RedisLiveness>(spec.redis, std::move(callbacks), options);
}

}  // namespace docsync::publish
