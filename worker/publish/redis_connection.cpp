// hiredis connections and the redis:// address.
#include "publish/redis_connection.hpp"

#include <cerrno>
#include <charconv>

#include "common/error.hpp"

namespace docsync::publish {

namespace {

[[noreturn]] void bad_url(std::string_view url, const std::string& problem) {
    throw Error("--sink " + std::string(url) + ": " + problem +
                "; expected redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?tombstone-ttl=SECONDS], as in "
                "redis://127.0.0.1:6379/0");
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

}  // namespace

std::string RedisAddress::display() const {
    return host + ":" + std::to_string(port) + "/" + std::to_string(db);
}

RedisAddress parse_redis_url(std::string_view url) {
    constexpr std::string_view scheme = "redis://";
    if (url.substr(0, scheme.size()) != scheme) bad_url(url, "not a redis:// URL");
    std::string_view rest = url.substr(scheme.size());
    RedisAddress address;

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
            long long seconds = 0;
            if (key == "tombstone-ttl") {
                if (!parse_int(value, 1, 10LL * 365 * 86400, seconds))
                    bad_url(url, "tombstone-ttl must be a number of seconds, at least 1");
                address.tombstone_ttl = std::chrono::seconds(seconds);
            } else {
                bad_url(url, "unknown parameter '" + std::string(key) + "'");
            }
        }
    }
    if (auto at = rest.rfind('@'); at != std::string_view::npos) {
        std::string_view auth = rest.substr(0, at);
        rest = rest.substr(at + 1);
        auto colon = auth.find(':');
        if (colon == std::string_view::npos) bad_url(url, "credentials must be USER:PASSWORD or :PASSWORD");
        address.user = std::string(auth.substr(0, colon));
        address.password = std::string(auth.substr(colon + 1));
        if (address.password.empty()) bad_url(url, "the password after ':' is empty");
    }
    if (auto slash = rest.find('/'); slash != std::string_view::npos) {
        std::string_view db = rest.substr(slash + 1);
        rest = rest.substr(0, slash);
        long long n = 0;
        if (!db.empty()) {
            if (!parse_int(db, 0, 1 << 20, n)) bad_url(url, "the database '" + std::string(db) + "' is not a number");
            address.db = static_cast<int>(n);
        }
    }
    std::string_view host = rest;
    if (!rest.empty() && rest.front() == '[') {  // [::1]:6379
        auto close = rest.find(']');
        if (close == std::string_view::npos) bad_url(url, "an IPv6 host needs its closing ']'");
        host = rest.substr(1, close - 1);
        rest = rest.substr(close + 1);
        if (!rest.empty() && rest.front() != ':') bad_url(url, "unexpected text after the host");
        rest = rest.empty() ? rest : rest.substr(1);
        if (!rest.empty()) {
            long long port = 0;
            if (!parse_int(rest, 1, 65535, port)) bad_url(url, "the port '" + std::string(rest) + "' is not 1-65535");
            address.port = static_cast<int>(port);
        }
    } else if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
        host = rest.substr(0, colon);
        long long port = 0;
        std::string_view p = rest.substr(colon + 1);
        if (!parse_int(p, 1, 65535, port)) bad_url(url, "the port '" + std::string(p) + "' is not 1-65535");
        address.port = static_cast<int>(port);
    }
    if (host.empty()) bad_url(url, "the host is missing");
    address.host = std::string(host);
    return address;
}

std::string reply_text(const redisReply* reply) {
    if (reply == nullptr) return "no reply";
    if (reply->type == REDIS_REPLY_ERROR || reply->type == REDIS_REPLY_STATUS || reply->type == REDIS_REPLY_STRING)
        return std::string(reply->str, reply->len);
    return "reply of type " + std::to_string(reply->type);
}

std::unique_ptr<RedisConnection> RedisConnection::connect(const RedisAddress& address,
                                                          std::chrono::milliseconds timeout,
                                                          std::chrono::milliseconds command_timeout) {
    std::string where = "Redis at " + address.display();
    redisContext* raw = redisConnectWithTimeout(address.host.c_str(), address.port, to_timeval(timeout));
    if (raw == nullptr) throw Error("cannot connect to " + where + ": out of memory", {}, true);
    std::unique_ptr<RedisConnection> conn(new RedisConnection(raw, where));
    if (raw->err) throw Error("cannot connect to " + where + ": " + raw->errstr, {}, true);
    if (redisSetTimeout(raw, to_timeval(command_timeout)) != REDIS_OK)
        throw Error("cannot set the command timeout on " + where + ": " + raw->errstr, {}, true);
    auto check = [&](Reply reply, const std::string& what) {
        if (reply->type == REDIS_REPLY_ERROR)
            throw Error(what + " failed on " + where + ": " + reply_text(reply.get()), {}, true);
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
    for (const auto& args : commands) {
        Argv a(args);
        if (redisAppendCommandArgv(ctx_.get(), a.count(), a.argv.data(), a.argvlen.data()) != REDIS_OK)
            throw io_error();
    }
    std::vector<Reply> replies;
    replies.reserve(commands.size());
    for (std::size_t i = 0; i < commands.size(); ++i) {
        void* raw = nullptr;
        if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) throw io_error();
        replies.emplace_back(static_cast<redisReply*>(raw));
    }
    return replies;
}

Error RedisConnection::io_error() const {
    std::string why = ctx_->err ? ctx_->errstr : "connection lost";
    if (ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) why = "timed out waiting for a reply";
    return Error(where_ + ": " + why, {}, true);
}

}  // namespace docsync::publish
