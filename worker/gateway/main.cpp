// docsync-gateway: wiring only. Settings, then the Redis feed, the hub and the HTTP server on one
// I/O thread, until SIGTERM or SIGINT.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <functional>
#include <memory>

#include "common/error.hpp"
#include "common/log.hpp"
#include "gateway/access.hpp"
#include "gateway/feed.hpp"
#include "gateway/hub.hpp"
#include "gateway/key_forms.hpp"
#include "gateway/server.hpp"
#include "gateway/settings.hpp"
#include "redis/keys.hpp"
#include "settings/listen.hpp"

extern char** environ;

namespace asio = boost::asio;
using namespace docsync;
using namespace docsync::gateway;

namespace {

// Each client is a descriptor: the soft limit (often 1024) goes up to the hard one. Below what
// --max-connections needs, a --max-connections the user chose is a warning with the fix; the default
// is only a ceiling, so then an INFO line says how many connections the limit allows.
void raise_descriptor_limit(std::size_t wanted, bool chosen) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &limit);
    }
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= wanted + 64) return;
    std::string needed = std::to_string(wanted + 64);
    std::string room = std::to_string(limit.rlim_cur > 64 ? limit.rlim_cur - 64 : 0);
    std::string fix = "ulimit -n " + needed + " (as root) in the shell that starts it, or LimitNOFILE=" + needed +
                      " in its systemd unit";
    if (chosen)
        log_warning("gateway", "the descriptor limit (" + std::to_string(limit.rlim_cur) + ") allows about " + room +
                                   " client connections, below --max-connections " + std::to_string(wanted) +
                                   ": raise it with " + fix);
    else
        log_info("gateway", "the descriptor limit (" + std::to_string(limit.rlim_cur) + ") allows about " + room +
                                " client connections; for more (up to the default --max-connections " +
                                std::to_string(wanted) + "), raise it with " + fix);
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);
    auto parsed = parse_gateway_settings(argc, argv, environ);
    if (!parsed.run) {
        if (!parsed.output.empty()) std::fputs(parsed.output.c_str(), stdout);
        if (!parsed.error.empty()) std::fprintf(stderr, "%s\n", parsed.error.c_str());
        return parsed.exit_code;
    }
    const GatewaySettings& settings = parsed.settings;
    if (auto error = apply_gateway_log_settings(settings); !error.empty()) {
        std::fprintf(stderr, "%s\n", error.c_str());
        return 2;
    }

    raise_descriptor_limit(settings.max_connections, settings.max_connections != GatewaySettings{}.max_connections);
    try {
        asio::io_context io(1);
        Hub* hub_ptr = nullptr;
        FeedEvents events;
        events.message = [&](const std::string& channel, std::string payload) {
            hub_ptr->receive(channel, std::move(payload));
        };
        events.subscribed = [&](const std::string& channel) {
            asio::post(io, [&, channel] { hub_ptr->on_subscribed(channel); });
        };
        events.state = [](bool up) {
            if (!up) log_warning("gateway", "Redis is unreachable: streams stay open and catch up when it is back");
        };
        FeedOptions feed_options;
        feed_options.readers = settings.redis_connections;
        std::unique_ptr<Feed> feed_ptr =
            settings.redis.rfind("redis-cluster://", 0) == 0
                ? std::make_unique<Feed>(publish::parse_redis_cluster_url(settings.redis), std::move(events), feed_options)
                : std::make_unique<Feed>(publish::parse_redis_url(settings.redis), std::move(events), feed_options);
        Feed& feed = *feed_ptr;
        Hub hub(io, feed, settings.warm_rate, settings.max_queued_bytes, settings.max_missing_docs);
        hub_ptr = &hub;

        TokenVerifier verifier(settings.jwt_secret);
        ServerOptions options;
        options.listen_address = settings.listen_address;
        options.listen_port = settings.listen_port;
        options.public_channels = Patterns(settings.public_patterns);
        options.allow_origins = settings.allow_origins;
        options.max_connections = settings.max_connections;
        options.max_channels = settings.max_channels;
        options.slow_client_timeout = settings.slow_client_timeout;
        options.heartbeat = settings.heartbeat;
        options.idle_timeout = settings.idle_timeout;
        options.threads = settings.threads;
        Server server(io, hub, verifier, options);
        server.start();
        std::string opened = verifier.enabled() ? "tokens signed with the key of --jwt-secret-file" : "no tokens";
        std::string open_channels;
        for (const auto& p : settings.public_patterns) open_channels += (open_channels.empty() ? "" : ", ") + p;
        log_info("gateway", "listening on " + settings::format_listen_address(settings.listen_address, server.port()) +
                                " (" + std::to_string(settings.threads) + " I/O threads) for " + feed.display() +
                                "; accepts " + opened + "; public channels: " +
                                (open_channels.empty() ? "none" : open_channels));
        if (!verifier.enabled() && settings.public_patterns.empty())
            log_warning("gateway", "no --jwt-secret-file and no --public pattern: every channel is refused");
        feed.start();
        // the worker's query list, for refusing channels whose keys are not in canonical text
        asio::steady_timer key_forms_timer(io);
        std::function<void()> refresh_key_forms = [&] {
            feed.read(std::string(publish::kKeyTypesKey), [](FeedRead read) {
                if (read.ok && !read.value) key_forms().forget();  // not loaded: the worker refuses
                if (read.ok && read.value && !key_forms().update(*read.value))
                    log_warning("gateway", std::string(publish::kKeyTypesKey) + " holds no query list; channel keys are not checked");
            });
            key_forms_timer.expires_after(kKeyFormsRefresh);
            key_forms_timer.async_wait([&](const boost::system::error_code& ec) {
                if (!ec) refresh_key_forms();
            });
        };
        refresh_key_forms();

        asio::signal_set hangup(io, SIGHUP);
        asio::signal_set stop_signals(io, SIGINT, SIGTERM);
        // Stopping lets the I/O thread run dry rather than cutting it off: every connection's pending
        // operation ends (its socket closed) and releases it while the server and hub still exist.
        stop_signals.async_wait([&](const boost::system::error_code& ec, int signal) {
            if (ec) return;
            log_info("gateway", std::string("stopping (") + (signal == SIGINT ? "SIGINT" : "SIGTERM") + ")");
            server.stop();
            key_forms_timer.cancel();
            feed.stop();  // nothing more is posted
            hangup.cancel();
        });
        std::function<void()> wait_hangup = [&] {
            hangup.async_wait([&](const boost::system::error_code& ec, int) {
                if (ec) return;
                reopen_log();
                wait_hangup();
            });
        };
        wait_hangup();
        io.run();
        server.join();
    } catch (const std::exception& e) {
        log_error("gateway", e.what());
        return 1;
    }
    return 0;
}
