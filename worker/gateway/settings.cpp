// The gateway's settings table, read by the readers every docsync program shares (settings/table.hpp):
// every setting's name, kind, help text, default and reader, in --help order, and the gateway as the
// readers see it (its name, DOCSYNC_GATEWAY_* variables, examples and --help's prose).
#include "gateway/settings.hpp"

#include <arpa/inet.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <thread>

#include "common/error.hpp"
#include "gateway/access.hpp"
#include "redis/connection.hpp"
#include "settings/listen.hpp"
#include "settings/log_settings.hpp"

namespace docsync::gateway {

unsigned default_threads() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
    return std::max(1u, std::thread::hardware_concurrency());
}

using namespace settings;

namespace {

using Spec = settings::Spec<GatewaySettings>;

// --- per-setting readers: each throws SettingError saying what is wrong and the fix ---

// --redis: the worker's Redis, read as the worker reads its --sink.
std::string redis_url(std::string_view text) {
    std::string value(trim(text));
    try {
        if (value.rfind("redis-cluster://", 0) == 0) publish::parse_redis_cluster_url(value);
        else if (value.rfind("redis://", 0) == 0) publish::parse_redis_url(value);
        else
            throw SettingError("not a Redis URL; give the worker's --sink: redis://HOST[:PORT][/DB] or "
                               "redis-cluster://HOST:PORT[,HOST:PORT...], e.g. redis://127.0.0.1:6379");
    } catch (const Error& e) {
        // The URL parsers name the worker's setting ("--sink URL: …"); the reader names this one.
        std::string message = e.what();
        std::string worker_prefix = "--sink " + value + ": ";
        if (message.rfind(worker_prefix, 0) == 0) message.erase(0, worker_prefix.size());
        throw SettingError(message);
    }
    return value;
}

// --listen: where HTTP is served. A host name is allowed (localhost in a container's setup), and port
// 0 takes any free port, which the gateway logs.
void listen_on(GatewaySettings& s, std::string_view text) {
    auto parsed = parse_listen_address(
        text, {.host_names = true, .any_port = true, .examples = "127.0.0.1:8080, [::]:8080 or localhost:8080"});
    s.listen_address = parsed.address;
    s.listen_port = parsed.port;
}

// --jwt-secret-file: read now, so that a missing or short key stops the start with exit status 2
// rather than refusing every token later.
void secret_file(GatewaySettings& s, std::string_view text) {
    std::string path(trim(text));
    if (path.empty())
        throw SettingError("must not be empty; give the file holding the tokens' HS256 key, e.g. "
                           "/etc/docsync/gateway.key (made with: openssl rand -hex 32 > /etc/docsync/gateway.key)");
    try {
        s.jwt_secret = read_secret_file(path);
    } catch (const std::runtime_error& e) {
        throw SettingError(e.what());
    }
    s.jwt_secret_file = path;
}

std::string public_pattern(std::string_view text) {
    std::string value(trim(text));
    if (std::string why = pattern_error(value); !why.empty()) throw SettingError(why);
    return value;
}

// --allow-origin: "*", or an origin exactly as browsers send it in the Origin header, since origins
// are compared as text: scheme://host[:port] in lower case, without the scheme's default port and
// without a path. One spelled otherwise would never match.
std::string allowed_origin(std::string_view text) {
    std::string value(trim(text));
    const std::string fix = "; give an origin as scheme://host[:port], e.g. https://app.example.com or "
                            "http://localhost:3000, or * for any origin";
    if (value == "*") return value;
    auto sep = value.find("://");
    if (sep == std::string::npos || sep == 0) throw SettingError("not an origin" + fix);
    std::string scheme = value.substr(0, sep);
    bool scheme_ok = std::isalpha(static_cast<unsigned char>(scheme[0]));
    for (char c : scheme)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') scheme_ok = false;
    if (!scheme_ok) throw SettingError("\"" + scheme + "\" is not a URL scheme" + fix);
    std::string rest = value.substr(sep + 3);
    if (rest.empty()) throw SettingError("the origin names no host" + fix);
    if (auto path = rest.find_first_of("/?#"); path != std::string::npos)
        throw SettingError("an origin has no path (not even a final /); write " + scheme + "://" + rest.substr(0, path));
    if (rest.find('@') != std::string::npos) throw SettingError("an origin has no user name or password" + fix);
    if (lower(value) != value)
        throw SettingError("browsers send origins in lower case, so this one would never match; write " + lower(value));
    std::string host = rest;
    std::string port;
    bool ip = false;
    unsigned char probe[sizeof(in6_addr)];
    if (!rest.empty() && rest.front() == '[') {
        auto close = rest.find(']');
        if (close == std::string::npos) throw SettingError("an IPv6 host needs its closing ]" + fix);
        host = rest.substr(1, close - 1);
        ip = inet_pton(AF_INET6, host.c_str(), probe) == 1;
        std::string after = rest.substr(close + 1);
        if (!after.empty() && after.front() != ':') throw SettingError("unexpected text after the host" + fix);
        if (!after.empty()) port = after.substr(1);
        if (!ip) throw SettingError("\"" + host + "\" is not an IPv6 address" + fix);
    } else if (auto colon = rest.rfind(':'); colon != std::string::npos) {
        host = rest.substr(0, colon);
        port = rest.substr(colon + 1);
        if (port.empty()) throw SettingError("the port after ':' is missing" + fix);
    }
    if (!ip) ip = inet_pton(AF_INET, host.c_str(), probe) == 1;
    if (!ip && !is_host_name(host)) throw SettingError("\"" + host + "\" is not a host name or IP address" + fix);
    if (!port.empty()) {
        // Digits only, without a leading zero: browsers write the port as a plain number.
        bool digits = port.size() <= 5 && port.front() != '0' &&
                      std::all_of(port.begin(), port.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
        if (!digits || std::stoul(port) > 65535)
            throw SettingError("\"" + port + "\" is not a port from 1 to 65535" + fix);
        if ((scheme == "https" && port == "443") || (scheme == "http" && port == "80"))
            throw SettingError("browsers leave out the default port, so this origin would never match; write " +
                               value.substr(0, value.size() - port.size() - 1));
    }
    return value;
}

const std::vector<Spec>& specs() {
    static const std::vector<Spec> table = {
        {"redis", Kind::Text, "URL",
         "the Redis the worker publishes to (its --sink): redis://host:port[/db] or "
         "redis-cluster://host:port[,host:port...]",
         [](const GatewaySettings& s) { return s.redis; },
         [](GatewaySettings& s, std::string_view v) { s.redis = redis_url(v); }},
        {"listen", Kind::Text, "ADDR:PORT",
         "where HTTP, Server-Sent Events and WebSocket are served: an IP address ([::] for IPv6) or a host name, "
         "and a port; port 0 takes any free port, logged at start",
         [](const GatewaySettings& s) { return format_listen_address(s.listen_address, s.listen_port); }, listen_on},
        {"public", Kind::List, "PATTERN",
         "channels anyone may follow without a token: a channel (db:menu:1) or a prefix ending in * (db:menu:*); "
         "repeat it for more",
         [](const GatewaySettings&) { return std::string("(none)"); },
         [](GatewaySettings& s, std::string_view v) { s.public_patterns.push_back(public_pattern(v)); }},
        {"jwt-secret-file", Kind::Text, "FILE",
         "file holding the HS256 key (at least 32 bytes) of the tokens that grant channels; without it no token is "
         "accepted and only --public channels can be followed",
         [](const GatewaySettings& s) { return s.jwt_secret_file.empty() ? std::string("(none)") : s.jwt_secret_file; },
         secret_file},
        {"allow-origin", Kind::List, "ORIGIN",
         "a web origin whose pages may read the gateway across origins (CORS), as scheme://host[:port] "
         "(https://app.example.com), or * for any; repeat it for more",
         [](const GatewaySettings&) { return std::string("(none: same origin only)"); },
         [](GatewaySettings& s, std::string_view v) { s.allow_origins.push_back(allowed_origin(v)); }},
        {"max-connections", Kind::Count, "N", "most client connections open at once; more are answered 503",
         [](const GatewaySettings& s) { return std::to_string(s.max_connections); },
         [](GatewaySettings& s, std::string_view v) { s.max_connections = count_in(v, 1, 1000000); }},
        {"max-channels", Kind::Count, "N", "most channels one SSE stream or one WebSocket may follow",
         [](const GatewaySettings& s) { return std::to_string(s.max_channels); },
         [](GatewaySettings& s, std::string_view v) { s.max_channels = count_in(v, 1, 100000); }},
        {"slow-client-timeout", Kind::Duration, "DURATION",
         "a client whose socket has taken no bytes for this long while a doc waits for it is disconnected",
         [](const GatewaySettings& s) { return format_duration(s.slow_client_timeout); },
         [](GatewaySettings& s, std::string_view v) {
             s.slow_client_timeout = duration_in(v, std::chrono::seconds(1), std::chrono::hours(1));
         }},
        {"heartbeat", Kind::Duration, "DURATION",
         "keep-alive interval of idle streams: an SSE comment, a WebSocket ping",
         [](const GatewaySettings& s) { return format_duration(s.heartbeat); },
         [](GatewaySettings& s, std::string_view v) {
             s.heartbeat = duration_in(v, std::chrono::seconds(1), std::chrono::hours(1));
         }},
        {"idle-timeout", Kind::Duration, "DURATION",
         "a WebSocket that follows no channel, or an HTTP connection that sends no request, for this long is "
         "closed, so idle sockets cannot hold the connection slots",
         [](const GatewaySettings& s) { return format_duration(s.idle_timeout); },
         [](GatewaySettings& s, std::string_view v) {
             s.idle_timeout = duration_in(v, std::chrono::seconds(1), std::chrono::hours(1));
         }},
        {"threads", Kind::Count, "N", "I/O threads serving the clients, each a share of the connections (default: the cores)",
         [](const GatewaySettings& s) { return std::to_string(s.threads); },
         [](GatewaySettings& s, std::string_view v) { s.threads = static_cast<unsigned>(count_in(v, 1, 256)); }},
        {"warm-rate", Kind::Count, "N", "docs Redis does not hold that the worker is asked for per second, at most (docsync:warm)",
         [](const GatewaySettings& s) { return std::to_string(s.warm_rate); },
         [](GatewaySettings& s, std::string_view v) { s.warm_rate = static_cast<unsigned>(count_in(v, 1, 1000000)); }},
        {"max-missing-docs", Kind::Count, "N",
         "followed channels whose doc Redis does not hold that are subscribed on Redis at once, at most (with the "
         "worker's --live subscribers each is a doc it computes and keeps live); more wait, followed, until a "
         "place frees",
         [](const GatewaySettings& s) { return std::to_string(s.max_missing_docs); },
         [](GatewaySettings& s, std::string_view v) { s.max_missing_docs = count_in(v, 1, 10000000); }},
        {"max-queued-bytes", Kind::Size, "SIZE",
         "docs received from Redis and not yet handed to the clients, at most: one per channel, the newest; a "
         "channel whose doc does not fit is read again from Redis",
         [](const GatewaySettings& s) { return format_size(s.max_queued_bytes); },
         [](GatewaySettings& s, std::string_view v) {
             s.max_queued_bytes = size_in(v, 1024 * 1024, std::uint64_t(64) * 1024 * 1024 * 1024);
         }},
        {"redis-connections", Kind::Count, "N", "Redis connections for reads (GET) per node, each master of a Redis Cluster, besides the subscriber",
         [](const GatewaySettings& s) { return std::to_string(s.redis_connections); },
         [](GatewaySettings& s, std::string_view v) { s.redis_connections = static_cast<unsigned>(count_in(v, 1, 64)); }},
        {"config", Kind::Text, "FILE", "JSON config file whose keys are these settings' long names",
         [](const GatewaySettings& s) { return s.config.empty() ? std::string("(none)") : s.config; },
         [](GatewaySettings& s, std::string_view v) { s.config = non_empty(v, "/etc/docsync/gateway.json"); }},
        {"log-format", Kind::Choice, "text|json", "log lines as text or as one JSON object per line",
         [](const GatewaySettings& s) { return std::string(log_format_name(s.log_format)); },
         [](GatewaySettings& s, std::string_view v) { s.log_format = parse_log_format(v); }},
        {"log-file", Kind::Text, "FILE", "append the log to this file instead of stderr; reopened on SIGHUP",
         [](const GatewaySettings& s) { return s.log_file.empty() ? std::string("(stderr)") : s.log_file; },
         [](GatewaySettings& s, std::string_view v) { s.log_file = non_empty(v, "/var/log/docsync/gateway.log"); }},
        {"log-level", Kind::Choice, "LEVEL", "lowest level logged: debug, info, warning or error",
         [](const GatewaySettings& s) { return std::string(log_level_name(s.log_level)); },
         [](GatewaySettings& s, std::string_view v) { s.log_level = parse_log_level(v); }},
    };
    return table;
}

const Program& program() {
    static const Program gateway = {
        .name = "docsync-gateway",
        .env_prefix = "DOCSYNC_GATEWAY_",
        .foreign_env_prefix = "",
        .config_path_example = "/etc/docsync/gateway.json",
        .log_file_example = "/var/log/docsync/gateway.log",
        .config_object_example = "{\"redis\": \"redis://127.0.0.1:6379\", \"public\": [\"db:menu:*\"]}",
        .quoting_example = "--log-file '/var/log/docsync/gateway log.txt'",
        .help_intro = "docsync-gateway: serves docsync's live docs to browsers and apps over HTTP, Server-Sent "
                      "Events and WebSocket, from the docsync Redis.\n\n"
                      "Usage: docsync-gateway [settings]\n\n",
        .help_notes =
            "Every setting can also be given as an environment variable DOCSYNC_GATEWAY_<NAME> (upper case,\n"
            "dashes as underscores: DOCSYNC_GATEWAY_MAX_CONNECTIONS=50000) or as a key of the JSON config file\n"
            "named by --config or DOCSYNC_GATEWAY_CONFIG ({\"max-connections\": 50000}; unknown keys are\n"
            "errors). The worker's DOCSYNC_* variables are not read.\n"
            "Precedence: flag > environment variable > config file > default.\n"
            "Durations: a whole number with ms, s, min, h or d (a unit is required; 5sec is refused, naming\n"
            "the spelling to use).\n"
            "A setting given several times (--public, --allow-origin) takes every value; as an environment\n"
            "variable, one per line; in the config file, an array of strings.\n"
            "Invalid settings exit with status 2.\n",
    };
    return gateway;
}

}  // namespace

ParsedGatewaySettings parse_gateway_settings(int argc, const char* const* argv, const char* const* envp) {
    return settings::parse(program(), specs(), argc, argv, envp);
}

std::string apply_gateway_log_settings(const GatewaySettings& s) {
    return settings::apply_log_settings(program(), s.log_format, s.log_file, s.log_level);
}

std::string gateway_settings_help() { return help_text(program(), table_of(specs())); }

}  // namespace docsync::gateway
