// hiredis connections and the redis:// address.
#include "redis/connection.hpp"

#include <cerrno>
#include <charconv>

#include "common/error.hpp"

namespace docsync::redis {

namespace {

constexpr std::string_view kSingleForm =
    "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?tombstone-ttl=SECONDS&wait-replicas=N&wait-timeout=MS], as in "
    "redis://127.0.0.1:6379/0";
constexpr std::string_view kClusterForm =
    "redis-cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...][?tombstone-ttl=SECONDS&wait-replicas=N&wait-timeout=MS], "
    "as in "
    "redis-cluster://10.0.0.1:7000,10.0.0.2:7000";

// The caller names its own setting (the worker's --sink, the gateway's --redis) and the URL.
[[noreturn]] void bad_url(std::string_view /*url*/, const std::string& problem, std::string_view form) {
    throw misconfigured(problem + "; expected " + std::string(form));
}

bool parse_int(std::string_view text, long long min, long long max, long long& out) {
    if (text.empty()) return false;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size() && out >= min && out <= max;
}

timeval to_timeval(std::chrono::milliseconds ms) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
    return tv;
}

// What both URL forms share: after the scheme, [[USER]:PASSWORD@]HOSTS[/DB][?PARAMETERS]. Sets the
// credentials and the tombstone TTL in `address` and returns HOSTS[/DB].
std::string_view parse_common(std::string_view url, std::string_view scheme, std::string_view form,
                              RedisAddress& address) {
    if (url.substr(0, scheme.size()) != scheme) bad_url(url, "not a " + std::string(scheme) + " URL", form);
    std::string_view rest = url.substr(scheme.size());
    if (auto q = rest.find('?'); q != std::string_view::npos) {
        std::string_view query = rest.substr(q + 1);
        rest = rest.substr(0, q);
        while (!query.empty()) {
            auto amp = query.find('&');
            std::string_view item = query.substr(0, amp);
            query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
            auto eq = item.find('=');
            std::string_view key = item.substr(0, eq);
            std::string_view value = eq == std::string_view::npos ? std::string_view{} : item.substr(eq + 1);
            long long n = 0;
            if (key == "tombstone-ttl") {
                if (!parse_int(value, 1, 10LL * 365 * 86400, n))
                    bad_url(url, "tombstone-ttl must be a number of seconds, at least 1", form);
                address.tombstone_ttl = std::chrono::seconds(n);
            } else if (key == "wait-replicas") {
                if (!parse_int(value, 0, 100, n)) bad_url(url, "wait-replicas must be a number of replicas, 0-100", form);
                address.wait_replicas = static_cast<int>(n);
            } else if (key == "wait-timeout") {
                if (!parse_int(value, 1, 600000, n))
                    bad_url(url, "wait-timeout must be a number of milliseconds, 1-600000", form);
                address.wait_timeout = std::chrono::milliseconds(n);
            } else {
                bad_url(url, "unknown parameter '" + std::string(key) + "' (known: tombstone-ttl, wait-replicas, wait-timeout)",
                        form);
            }
        }
    }
    if (auto at = rest.rfind('@'); at != std::string_view::npos) {
        std::string_view auth = rest.substr(0, at);
        rest = rest.substr(at + 1);
        auto colon = auth.find(':');
        if (colon == std::string_view::npos) bad_url(url, "credentials must be USER:PASSWORD or :PASSWORD", form);
        address.user = std::string(auth.substr(0, colon));
        address.password = std::string(auth.substr(colon + 1));
        if (address.password.empty()) bad_url(url, "the password after ':' is empty", form);
    }
    return rest;
}

// HOST[:PORT], HOST an IPv6 address in brackets or not.
void parse_host_port(std::string_view url, std::string_view rest, std::string_view form, bool port_required,
                     RedisAddress& address) {
    std::string_view host = rest;
    std::string_view port;
    bool has_port = false;
    if (!rest.empty() && rest.front() == '[') {  // [::1]:6379
        auto close = rest.find(']');
        if (close == std::string_view::npos) bad_url(url, "an IPv6 host needs its closing ']'", form);
        host = rest.substr(1, close - 1);
        rest = rest.substr(close + 1);
        if (!rest.empty() && rest.front() != ':') bad_url(url, "unexpected text after the host", form);
        has_port = !rest.empty();
        port = has_port ? rest.substr(1) : rest;
    } else if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
        host = rest.substr(0, colon);
        port = rest.substr(colon + 1);
        has_port = true;
    }
    if (host.empty()) bad_url(url, "a host is missing", form);
    if (has_port) {
        long long n = 0;
        if (!parse_int(port, 1, 65535, n)) bad_url(url, "the port '" + std::string(port) + "' is not 1-65535", form);
        address.port = static_cast<int>(n);
    } else if (port_required) {
        bad_url(url, "the host " + std::string(host) + " needs its :PORT", form);
    }
    address.host = std::string(host);
}

}  // namespace

std::string RedisAddress::display() const {
    return host + ":" + std::to_string(port) + "/" + std::to_string(db);
}

std::string RedisClusterAddress::display() const {
    std::string out = "Redis Cluster via ";
    for (std::size_t i = 0; i < seeds.size(); ++i) {
        const auto& host = seeds[i].host;
        out += (i ? "," : "") + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
               std::to_string(seeds[i].port);
    }
    return out;
}

RedisAddress parse_redis_url(std::string_view url) {
    RedisAddress address;
    std::string_view rest = parse_common(url, "redis://", kSingleForm, address);
    if (auto slash = rest.find('/'); slash != std::string_view::npos) {
        std::string_view db = rest.substr(slash + 1);
        rest = rest.substr(0, slash);
        long long n = 0;
        if (!db.empty()) {
            if (!parse_int(db, 0, 1 << 20, n))
                bad_url(url, "the database '" + std::string(db) + "' is not a number", kSingleForm);
            address.db = static_cast<int>(n);
        }
    }
    if (rest.find(',') != std::string_view::npos)
        bad_url(url, "a redis:// URL names one server; for several nodes of a Redis Cluster use redis-cluster://",
                kSingleForm);
    parse_host_port(url, rest, kSingleForm, false, address);
    return address;
}

RedisClusterAddress parse_redis_cluster_url(std::string_view url) {
    RedisAddress common;
    std::string_view rest = parse_common(url, "redis-cluster://", kClusterForm, common);
    if (auto slash = rest.find('/'); slash != std::string_view::npos) {
        if (rest.substr(slash) != "/" && rest.substr(slash) != "/0")
            bad_url(url, "a Redis Cluster has database 0 only: remove /" + std::string(rest.substr(slash + 1)),
                    kClusterForm);
        rest = rest.substr(0, slash);
    }
    RedisClusterAddress cluster;
    cluster.tombstone_ttl = common.tombstone_ttl;
    cluster.wait_replicas = common.wait_replicas;
    cluster.wait_timeout = common.wait_timeout;
    while (true) {
        auto comma = rest.find(',');
        RedisAddress seed = common;
        parse_host_port(url, rest.substr(0, comma), kClusterForm, true, seed);
        cluster.seeds.push_back(std::move(seed));
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
    }
    return cluster;
}

std::unique_ptr<RedisConnection> RedisConnection::connect(const RedisAddress& address,
                                                          std::chrono::milliseconds timeout,
                                                          std::chrono::milliseconds command_timeout) {
    std::string where = "Redis at " + address.display();
    redisContext* raw = redisConnectWithTimeout(address.host.c_str(), address.port, to_timeval(timeout));
    if (raw == nullptr) throw unreachable("cannot connect to " + where + ": out of memory");
    std::unique_ptr<RedisConnection> conn(new RedisConnection(raw, where));
    if (raw->err) throw unreachable("cannot connect to " + where + ": " + raw->errstr);
    if (redisSetTimeout(raw, to_timeval(command_timeout)) != REDIS_OK)
        throw unreachable("cannot set the command timeout on " + where + ": " + raw->errstr);
    auto check = [&](Reply reply, const std::string& what) {
        if (is_error(reply)) throw refused(what + " failed on " + where + ": " + reply_text(reply.get()));
    };
    if (!address.password.empty()) {
        if (address.user.empty())
            check(conn->command({"AUTH", address.password}), "AUTH");
        else
            check(conn->command({"AUTH", address.user, address.password}), "AUTH");
    }
    if (address.db != 0) check(conn->command({"SELECT", std::to_string(address.db)}), "SELECT");
    return conn;
}

namespace {

struct Argv {
    std::vector<const char*> argv;
    std::vector<std::size_t> argvlen;
    explicit Argv(const std::vector<std::string_view>& args) {
        argv.reserve(args.size());
        argvlen.reserve(args.size());
        for (auto a : args) {
            argv.push_back(a.data());
            argvlen.push_back(a.size());
        }
    }
    int count() const { return static_cast<int>(argv.size()); }
};

}  // namespace

Reply RedisConnection::command(const std::vector<std::string_view>& args) {
    Argv a(args);
    void* raw = redisCommandArgv(ctx_.get(), a.count(), a.argv.data(), a.argvlen.data());
    if (raw == nullptr) throw io_error();
    return Reply(static_cast<redisReply*>(raw));
}

std::vector<Reply> RedisConnection::pipeline(const std::vector<std::vector<std::string_view>>& commands) {
    send(commands);
    return receive(commands.size());
}

void RedisConnection::send(const std::vector<std::vector<std::string_view>>& commands) {
    for (const auto& args : commands) {
        Argv a(args);
        if (redisAppendCommandArgv(ctx_.get(), a.count(), a.argv.data(), a.argvlen.data()) != REDIS_OK)
            throw io_error();
    }
    int done = 0;
    while (!done)
        if (redisBufferWrite(ctx_.get(), &done) != REDIS_OK) throw io_error();
}

std::vector<Reply> RedisConnection::receive(std::size_t count) {
    std::vector<Reply> replies;
    replies.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        void* raw = nullptr;
        if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) throw io_error();
        replies.emplace_back(static_cast<redisReply*>(raw));
    }
    return replies;
}

Error RedisConnection::io_error() const {
    std::string why = ctx_->err ? ctx_->errstr : "connection lost";
    if (ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) why = "timed out waiting for a reply";
    return unreachable(where_ + ": " + why);
}

std::string wait_shortfall(const Reply& wait, const RedisAddress& address) {
    std::string asked = std::to_string(address.wait_replicas) + " replicas within " +
                        std::to_string(address.wait_timeout.count()) + " ms (wait-replicas in the Redis URL)";
    if (kind_of(wait) != ReplyKind::Integer) return "WAIT for " + asked + " failed: " + reply_text(wait.get()) + "; retried";
    return "only " + std::to_string(wait->integer) + " of " + asked + " acknowledged the docs; retried";
}

}  // namespace docsync::redis
