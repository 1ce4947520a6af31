// The acceptor, the shards, and HTTP requests and their routes (SSE streams: sse.cpp; the outbox:
// outbox.cpp; WebSockets: websocket.cpp).
#include "gateway/server.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <algorithm>
#include <array>

#include "common/error.hpp"
#include "common/log.hpp"
#include "gateway/assets.hpp"
#include "gateway/session.hpp"

namespace docsync::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
using wall_clock = std::chrono::system_clock;

// ---------------------------------------------------------------------------------------------
// Who may follow what.

std::optional<std::string> request_token(const Request& req, const Target& target) {
    if (auto it = req.find(http::field::authorization); it != req.end()) {
        if (auto token = bearer_token(std::string_view(it->value().data(), it->value().size()))) return token;
    }
    return target.first("token");
}

Caller identify(const TokenVerifier& verifier, const std::optional<std::string>& token, wall_clock::time_point now) {
    Caller caller;
    if (!token) return caller;
    auto result = verifier.verify(*token, now);
    if (result.grant) caller.grant = std::move(result.grant);
    else caller.refusal = std::move(result.refusal);
    return caller;
}

Verdict authorize(const Caller& caller, const Patterns& public_channels, std::string_view channel) {
    Verdict v;
    if (caller.refusal) {
        v.status = 401;
        v.code = caller.refusal->code;
        v.message = caller.refusal->message;
        return v;
    }
    if (public_channels.covers(channel) || (caller.grant && caller.grant->channels.covers(channel))) {
        v.allowed = true;
        return v;
    }
    std::string shown(channel.substr(0, 200));
    if (caller.grant) {
        v.status = 403;
        v.code = "forbidden";
        v.message = "the token does not open " + shown +
                    ": mint one whose \"channels\" claim names it (or a pattern such as db:order:*)";
    } else {
        v.status = 401;
        v.code = "missing_token";
        v.message = shown + " is not public: present a token, as the header Authorization: Bearer TOKEN or the "
                            "query parameter token=TOKEN";
    }
    return v;
}

std::string error_json(std::string_view code, std::string_view message, std::string_view channel) {
    std::string out = "{\"error\":" + json_string(code);
    if (!channel.empty()) out += ",\"channel\":" + json_string(channel);
    out += ",\"message\":" + json_string(message) + "}";
    return out;
}

void add_cors(http::fields& fields, const ServerOptions& options, std::string_view origin) {
    if (origin.empty()) return;
    bool any = std::find(options.allow_origins.begin(), options.allow_origins.end(), "*") != options.allow_origins.end();
    bool listed = std::find(options.allow_origins.begin(), options.allow_origins.end(), origin) != options.allow_origins.end();
    if (!any && !listed) return;
    fields.set(http::field::access_control_allow_origin, any ? beast::string_view("*") : beast::string_view(origin.data(), origin.size()));
    fields.set(http::field::access_control_expose_headers, "ETag");
    if (!any) fields.set(http::field::vary, "Origin");
}

// ---------------------------------------------------------------------------------------------
// Connections, shards and the server

Connection::Connection(Shard& shard, Seat seat) : shard_(shard), seat_(seat) { shard_.add(this); }
Connection::~Connection() {
    shard_.remove(this);
    if (seat_ == Seat::Counted) --shard_.counters().connections;
    else if (seat_ == Seat::Overflow) --shard_.counters().overflow;
}

Shard::Shard(Server& server, asio::io_context& hub_io, Hub& hub)
    : server_(server), work_(io_.get_executor()), hub_(io_, hub_io, hub), tick_(io_) {}

const TokenVerifier& Shard::verifier() const { return server_.verifier(); }
const ServerOptions& Shard::options() const { return server_.options(); }
ServerCounters& Shard::counters() { return server_.counters(); }
ServerStats Shard::stats() const { return server_.stats(); }

void Shard::start() {
    schedule_tick();
    thread_ = std::thread([this] { io_.run(); });
}

void Shard::stop() {
    asio::post(io_, [this] {
        stopping_ = true;
        tick_.cancel();
        std::vector<Connection*> all(connections_.begin(), connections_.end());
        for (auto* c : all) c->shut();
        work_.reset();  // the thread ends once the closed connections' operations have finished
    });
}

void Shard::join() {
    if (thread_.joinable()) thread_.join();
}

void Shard::schedule_tick() {
    // Just after each whole second of the wall clock: a token's exp is whole seconds, so its
    // expiry is seen within milliseconds.
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wall_clock::now().time_since_epoch()).count() % 1000;
    tick_.expires_after(std::chrono::milliseconds(1000 - ms + 2));
    tick_.async_wait([this](const boost::system::error_code& ec) {
        if (ec || stopping_) return;
        auto now = steady::now();
        auto wall = wall_clock::now();
        // A tick may close connections, which leave the set: walk a copy.
        std::vector<Connection*> all(connections_.begin(), connections_.end());
        for (auto* c : all)
            if (connections_.count(c)) c->tick(now, wall);
        schedule_tick();
    });
}

Server::Server(asio::io_context& io, Hub& hub, const TokenVerifier& verifier, ServerOptions options)
    : io_(io), verifier_(verifier), options_(std::move(options)), acceptor_(io) {
    for (unsigned i = 0; i < std::max(1u, options_.threads); ++i)
        shards_.push_back(std::make_unique<Shard>(*this, io, hub));
}

Server::~Server() {
    stop();
    join();
}

std::uint16_t Server::port() const {
    boost::system::error_code ec;
    auto ep = acceptor_.local_endpoint(ec);
    return ec ? 0 : ep.port();
}

ServerStats Server::stats() const {
    ServerStats s;
    s.connections = counters_.connections;
    s.sse_streams = counters_.sse_streams;
    s.websockets = counters_.websockets;
    s.slow_disconnects = counters_.slow_disconnects;
    s.expired_disconnects = counters_.expired_disconnects;
    s.idle_disconnects = counters_.idle_disconnects;
    s.refused = counters_.refused;
    s.refused_connections = counters_.refused_connections;
    return s;
}

void Server::start() {
    boost::system::error_code ec;
    asio::ip::address address = asio::ip::make_address(options_.listen_address, ec);
    tcp::endpoint endpoint;
    if (ec) {
        tcp::resolver resolver(io_);
        auto found = resolver.resolve(options_.listen_address, std::to_string(options_.listen_port), ec);
        if (ec || found.empty())
            throw Error("cannot resolve the listen address " + options_.listen_address + ": " + ec.message());
        endpoint = found.begin()->endpoint();
    } else {
        endpoint = tcp::endpoint(address, options_.listen_port);
    }
    std::string where = options_.listen_address + ":" + std::to_string(options_.listen_port);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        throw Error("cannot listen on " + where + ": " + ec.message() +
                    (ec == asio::error::address_in_use ? " (another process holds the port: choose another --listen)" : ""));
    for (auto& shard : shards_) shard->start();
    accept();
}

void Server::stop() {
    if (stopping_) return;
    stopping_ = true;
    boost::system::error_code ec;
    acceptor_.close(ec);
    for (auto& shard : shards_) shard->stop();
}

void Server::join() {
    for (auto& shard : shards_) shard->join();
}

// ---------------------------------------------------------------------------------------------
// HTTP requests

namespace {

using Response = http::response<http::string_body>;

constexpr std::chrono::milliseconds kHealthTimeout{1000};  // /healthz's wait for Redis's PONG

constexpr const char* kTooManyConnections =
    "this gateway holds --max-connections connections: retry later, or raise --max-connections";

std::string_view header(const Request& req, http::field f) {
    auto it = req.find(f);
    return it == req.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
}

// Whether an If-None-Match header names `etag` (or is `*`).
bool etag_matches(std::string_view header_value, std::string_view etag) {
    while (!header_value.empty()) {
        auto comma = header_value.find(',');
        std::string_view item = header_value.substr(0, comma);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (item.rfind("W/", 0) == 0) item.remove_prefix(2);
        if (item == "*" || item == etag) return true;
        if (comma == std::string_view::npos) break;
        header_value.remove_prefix(comma + 1);
    }
    return false;
}

class HttpSession : public Connection, public std::enable_shared_from_this<HttpSession> {
public:
    HttpSession(Shard& shard, Seat seat, tcp::socket socket) : Connection(shard, seat), socket_(std::move(socket)) {}

    void start() { read(); }

    void tick(steady::time_point now, wall_clock::time_point) override {
        if ((reading_ || writing_) && now >= deadline_) close();
    }
    void shut() override { close(); }

private:
    void close() {
        if (closed_) return;
        closed_ = true;
        boost::system::error_code ec;
        socket_.shutdown(tcp::socket::shutdown_both, ec);
        socket_.close(ec);
    }

    void read() {
        parser_.emplace();
        head_ = false;  // until a request says HEAD
        parser_->header_limit(16 * 1024);
        parser_->body_limit(16 * 1024);
        reading_ = true;
        // A connection that sends no request soon holds a slot for nothing: --idle-timeout.
        deadline_ = steady::now() + std::min(shard_.options().request_timeout, shard_.options().idle_timeout);
        auto self = shared_from_this();
        http::async_read(socket_, buffer_, *parser_, [self](beast::error_code ec, std::size_t) {
            self->reading_ = false;
            if (self->closed_) return;
            if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset)
                return self->close();
            if (ec) {
                // A request Beast could not parse (or too large): answer once, then close.
                bool too_large = ec == http::error::header_limit || ec == http::error::body_limit ||
                                 ec == http::error::buffer_overflow;
                return self->respond_error(too_large ? 431 : 400, "bad_request",
                                           too_large ? "the request's header or body is too large"
                                                     : "the request is not valid HTTP/1.1: " + ec.message(),
                                           {}, false);
            }
            self->route(self->parser_->release());
        });
    }

    void respond(Response res, bool keep_alive) {
        res.keep_alive(keep_alive);
        res.prepare_payload();
        if (head_) return respond_head(std::move(res));  // the header alone, its Content-Length kept
        auto shared = std::make_shared<Response>(std::move(res));
        writing_ = true;
        deadline_ = steady::now() + shard_.options().slow_client_timeout;
        auto self = shared_from_this();
        http::async_write(socket_, *shared, [self, shared](beast::error_code ec, std::size_t) {
            self->writing_ = false;
            if (ec || !shared->keep_alive()) return self->close();
            self->read();
        });
    }

    Response json(const Request& req, unsigned status, std::string body) {
        Response res(static_cast<http::status>(status), req.version());
        res.set(http::field::content_type, "application/json");
        res.set(http::field::cache_control, "no-store");
        add_cors(res, shard_.options(), header(req, http::field::origin));
        res.body() = std::move(body);
        return res;
    }

    void respond_error(unsigned status, std::string_view code, const std::string& message, std::string_view channel,
                       bool keep_alive, const Request* req = nullptr) {
        Request none;
        Response res = json(req ? *req : none, status, error_json(code, message, channel));
        if (status == 401)
            res.set(http::field::www_authenticate,
                    "Bearer error=\"" + std::string(code == "missing_token" ? "invalid_request" : "invalid_token") + "\"");
        if (status == 401 || status == 403) ++shard_.counters().refused;
        respond(std::move(res), keep_alive);
    }

    void route(Request req) {
        bool keep = req.keep_alive();
        head_ = req.method() == http::verb::head;
        auto target = parse_target(std::string_view(req.target().data(), req.target().size()));
        if (!target)
            return respond_error(400, "bad_request", "the request's target holds a malformed %-escape", {}, keep, &req);
        if (seat() == Seat::Overflow && target->path != "/healthz") {
            // Past --max-connections only /healthz is answered.
            ++shard_.counters().refused_connections;
            Response res = json(req, 503, error_json("too_many_connections", kTooManyConnections));
            res.set(http::field::retry_after, "5");
            return respond(std::move(res), false);
        }
        if (req.method() == http::verb::options) return preflight(req);
        if (req.method() != http::verb::get && req.method() != http::verb::head) {
            Response res = json(req, 405, error_json("method_not_allowed", "only GET is served here"));
            res.set(http::field::allow, "GET, HEAD, OPTIONS");
            return respond(std::move(res), keep);
        }
        const std::string& path = target->path;
        if (path == "/healthz") return healthz(req);
        if (path == "/v1/sse") return sse(std::move(req), *target);
        if (path == "/v1/ws") return websocket(std::move(req), *target);
        if (path.rfind("/v1/docs/", 0) == 0) return doc(std::move(req), *target, path.substr(9));
        if (const Asset* asset = find_asset(path)) {
            Response res(http::status::ok, req.version());
            res.set(http::field::content_type, beast::string_view(asset->content_type.data(), asset->content_type.size()));
            res.set(http::field::cache_control, "no-cache");
            res.set("X-Content-Type-Options", "nosniff");
            res.body() = std::string(asset->body);
            return respond(std::move(res), keep);
        }
        respond_error(404, "not_found",
                      "no such path; the gateway serves /v1/docs/{channel}, /v1/sse?channel=…, /v1/ws, /healthz and /",
                      {}, keep, &req);
    }

    // A HEAD answer keeps its Content-Length: sent as is, without prepare_payload.
    void respond_head(Response res) {
        auto shared = std::make_shared<Response>(std::move(res));
        writing_ = true;
        deadline_ = steady::now() + shard_.options().slow_client_timeout;
        auto self = shared_from_this();
        auto serializer = std::make_shared<http::response_serializer<http::string_body>>(*shared);
        http::async_write_header(socket_, *serializer, [self, shared, serializer](beast::error_code ec, std::size_t) {
            self->writing_ = false;
            if (ec || !shared->keep_alive()) return self->close();
            self->read();
        });
    }

    void preflight(const Request& req) {
        Response res(http::status::no_content, req.version());
        add_cors(res, shard_.options(), header(req, http::field::origin));
        if (res.find(http::field::access_control_allow_origin) != res.end()) {
            res.set(http::field::access_control_allow_methods, "GET, HEAD, OPTIONS");
            res.set(http::field::access_control_allow_headers, "Authorization, Last-Event-ID, If-None-Match");
            res.set(http::field::access_control_max_age, "600");
        }
        respond(std::move(res), req.keep_alive());
    }

    // Redis's state is a PING's round trip (answered within kHealthTimeout), not the last thing
    // the subscriber saw: a frozen Redis still completes TCP connects and takes writes.
    void healthz(const Request& req) {
        auto self = shared_from_this();
        auto shared_req = std::make_shared<Request>(req);
        reading_ = true;
        deadline_ = steady::now() + shard_.options().request_timeout;
        shard_.hub().health(kHealthTimeout, [self, shared_req](bool up, std::string why) {
            self->reading_ = false;
            if (self->closed_) return;
            self->respond(self->json(*shared_req, up ? 200 : 503, self->health_body(up, why)), shared_req->keep_alive());
        });
    }

    std::string health_body(bool up, const std::string& why) {
        auto s = shard_.stats();
        auto h = shard_.hub().stats();
        std::string body = std::string("{\"status\":\"") + (up ? "ok" : "unavailable") + "\",\"redis\":\"" +
                           (up ? "up" : "down") + "\"";
        if (!up) body += ",\"redis_error\":" + json_string(why);
        auto field = [&body](const char* name, std::uint64_t value) {
            body.append(",\"").append(name).append("\":").append(std::to_string(value));
        };
        field("connections", s.connections);
        field("sse_streams", s.sse_streams);
        field("websockets", s.websockets);
        field("channels", h.channels);
        field("followers", h.followers);
        field("slow_disconnects", s.slow_disconnects);
        field("expired_disconnects", s.expired_disconnects);
        field("idle_disconnects", s.idle_disconnects);
        field("refused_connections", s.refused_connections);
        field("docs_received", h.messages);
        field("older_docs_dropped", h.stale);
        field("queued_docs_replaced", h.replaced);
        field("queue_overflows", h.overflowed);
        field("missing_docs", h.missing);
        field("deferred_channels", h.deferred);
        field("warms_deferred", h.warms_dropped);
        body += "}";
        return body;
    }

    void doc(Request req, const Target& target, std::string channel) {
        bool keep = req.keep_alive();
        if (auto why = channel_error(channel); !why.empty())
            return respond_error(400, "bad_request", "/v1/docs/" + channel.substr(0, 200) + ": " + why, {}, keep, &req);
        Caller caller = identify(shard_.verifier(), request_token(req, target), wall_clock::now());
        Verdict verdict = authorize(caller, shard_.options().public_channels, channel);
        if (!verdict.allowed) return respond_error(verdict.status, verdict.code, verdict.message, channel, keep, &req);
        auto self = shared_from_this();
        auto shared_req = std::make_shared<Request>(std::move(req));
        reading_ = true;  // the request's deadline covers the read from Redis
        deadline_ = steady::now() + shard_.options().request_timeout;
        shard_.hub().read(channel, [self, shared_req, channel](DocPtr doc, std::string error) {
            self->reading_ = false;
            if (self->closed_) return;
            const Request& req = *shared_req;
            bool keep = req.keep_alive();
            if (!error.empty())
                return self->respond_error(503, "unavailable", "Redis cannot be read now: " + error, channel, keep, &req);
            if (!doc)
                return self->respond_error(404, "not_found",
                                           "docsync holds no doc for " + channel.substr(0, 200) +
                                               " yet; the worker has been asked to compute it: retry shortly, or "
                                               "follow it with /v1/sse or /v1/ws to get it when it comes",
                                           channel, keep, &req);
            std::string etag = "\"" + doc->version_text + "\"";
            Response res = self->json(req, 200, {});
            res.set(http::field::etag, etag);
            res.set(http::field::cache_control, "no-cache");
            if (etag_matches(header(req, http::field::if_none_match), etag)) {
                res.result(http::status::not_modified);
                res.erase(http::field::content_type);
                return self->respond(std::move(res), keep);
            }
            res.body() = doc->envelope;
            self->respond(std::move(res), keep);
        });
    }

    // The channels of an SSE or WebSocket request, each checked; false when one was refused (the
    // answer is on its way).
    bool check_channels(const Request& req, const std::vector<std::string>& channels, const Caller& caller) {
        bool keep = req.keep_alive();
        if (channels.size() > shard_.options().max_channels) {
            respond_error(400, "too_many_channels",
                          std::to_string(channels.size()) + " channels asked for; one connection follows at most " +
                              std::to_string(shard_.options().max_channels) + " (--max-channels)",
                          {}, keep, &req);
            return false;
        }
        for (std::size_t i = 0; i < channels.size(); ++i) {
            if (auto why = channel_error(channels[i]); !why.empty()) {
                respond_error(400, "bad_request", "channel " + json_string(channels[i].substr(0, 200)) + ": " + why,
                              channels[i].substr(0, 200), keep, &req);
                return false;
            }
            if (std::find(channels.begin(), channels.begin() + static_cast<std::ptrdiff_t>(i), channels[i]) !=
                channels.begin() + static_cast<std::ptrdiff_t>(i)) {
                respond_error(400, "bad_request", "channel " + channels[i].substr(0, 200) + " is given twice",
                              channels[i].substr(0, 200), keep, &req);
                return false;
            }
            Verdict verdict = authorize(caller, shard_.options().public_channels, channels[i]);
            if (!verdict.allowed) {
                respond_error(verdict.status, verdict.code, verdict.message, channels[i], keep, &req);
                return false;
            }
        }
        return true;
    }

    void sse(Request req, const Target& target) {
        auto channels = target.all("channel");
        if (channels.empty())
            return respond_error(400, "bad_request", "name the channels to follow: /v1/sse?channel=db:order:42", {},
                                 req.keep_alive(), &req);
        Caller caller = identify(shard_.verifier(), request_token(req, target), wall_clock::now());
        if (!check_channels(req, channels, caller)) return;
        // Where the client is: Last-Event-ID (sent by EventSource when it reconnects), or the
        // last-event-id parameter of a client that opened a new stream.
        std::string cursor;
        if (auto it = req.find("Last-Event-ID"); it != req.end()) cursor = std::string(it->value());
        if (cursor.empty()) cursor = target.first("last-event-id").value_or("");
        std::vector<std::optional<DocVersion>> floors(channels.size());
        if (!cursor.empty()) {
            if (auto parsed = parse_cursor(cursor, channels.size())) floors = std::move(*parsed);
            else log_debug("gateway", "ignored a Last-Event-ID that is not a cursor of this stream's channels");
        }
        if (head_) {
            // What a GET would open, without the stream: the header alone.
            Response res(http::status::ok, req.version());
            res.set(http::field::content_type, "text/event-stream");
            res.set(http::field::cache_control, "no-cache");
            add_cors(res, shard_.options(), header(req, http::field::origin));
            res.keep_alive(req.keep_alive());
            return respond_head(std::move(res));
        }
        auto expires = wall_clock::time_point::max();
        for (const auto& c : channels)
            if (needs_token(shard_.options().public_channels, c) && caller.grant) expires = caller.grant->expires;
        handed_off_ = true;
        start_sse(shard_, take_seat(), std::move(socket_), req, std::move(channels), std::move(floors), expires);
    }

    void websocket(Request req, const Target& target) {
        if (!beast::websocket::is_upgrade(req))
            return respond_error(426, "upgrade_required", "/v1/ws is a WebSocket: connect with a WebSocket client", {},
                                 req.keep_alive(), &req);
        // A refused token is told over the WebSocket (an error message, then a close): a browser
        // sees nothing of an HTTP answer to its upgrade.
        Caller caller = identify(shard_.verifier(), request_token(req, target), wall_clock::now());
        if (caller.refusal) ++shard_.counters().refused;
        handed_off_ = true;
        start_websocket(shard_, take_seat(), std::move(socket_), std::move(req), std::move(caller));
    }

    tcp::socket socket_;
    beast::flat_buffer buffer_{20 * 1024};  // above the header limit, so the parser reports it
    std::optional<http::request_parser<http::string_body>> parser_;
    steady::time_point deadline_{};
    bool reading_ = false;
    bool writing_ = false;
    bool closed_ = false;
    bool handed_off_ = false;
    bool head_ = false;  // the request being answered is a HEAD: the answer's header alone goes out
};

constexpr std::size_t kOverflowSeats = 64;  // connections past --max-connections that may ask /healthz

// The answer of a connection refused at accept: written at once and closed.
const std::string& too_many_connections_answer() {
    static const std::string body = error_json("too_many_connections", kTooManyConnections);
    static const std::string full =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
        "Retry-After: 5\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    return full;
}

}  // namespace

void Server::accept() {
    // Each connection goes to the next shard, and lives on its thread from the start.
    Shard& shard = *shards_[next_shard_++ % shards_.size()];
    acceptor_.async_accept(shard.io(), [this, &shard](boost::system::error_code ec, tcp::socket socket) {
        if (stopping_) return;
        if (ec) {
            // Out of descriptors, say: wait a moment instead of spinning on the error.
            log_warning("gateway", "accept failed: " + ec.message());
            auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(100));
            timer->async_wait([this, timer](const boost::system::error_code&) {
                if (!stopping_) accept();
            });
            return;
        }
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        // Only this thread raises the counts, so checking and raising them here cannot overshoot.
        Seat seat = Seat::None;
        if (counters_.connections < options_.max_connections) {
            ++counters_.connections;
            seat = Seat::Counted;
        } else if (counters_.overflow < kOverflowSeats) {
            // Full: a few more connections may still ask for /healthz, so that a load balancer
            // sees a live gateway; anything else they ask is answered 503.
            ++counters_.overflow;
            seat = Seat::Overflow;
        }
        if (seat == Seat::None) {
            // Answered at once and closed: the kernel's buffer of a fresh socket takes the few bytes.
            ++counters_.refused_connections;
            const std::string& full = too_many_connections_answer();
            socket.non_blocking(true, ignored);
            socket.write_some(asio::buffer(full), ignored);
            socket.close(ignored);
            log_debug("gateway", "refused a connection: --max-connections reached");
        } else {
            asio::post(shard.io(), [&shard, seat, socket = std::move(socket)]() mutable {
                std::make_shared<HttpSession>(shard, seat, std::move(socket))->start();
            });
        }
        accept();
    });
}

}  // namespace docsync::gateway
