// The acceptor, the shards, and the HTTP session that reads requests and writes their answers
// (the routes: router.cpp; the delivery core: delivery.cpp; SSE: sse.cpp; WebSockets: websocket.cpp).
#include "gateway/server.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <algorithm>
#include <array>

#include "common/error.hpp"
#include "common/log.hpp"
#include "gateway/router.hpp"

namespace docsync::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
using wall_clock = std::chrono::system_clock;

// ---------------------------------------------------------------------------------------------
// Connections, shards and the server

// A connection on a seat past --max-connections, as the acceptor sees it. Its seat is given back
// once: by the connection when it ends, or by the acceptor when it hands the seat to a newer one.
// The record is what eviction needs and no more: it never pins the session's memory, and the
// acceptor drops it once its seat is given back (pruned at every accept), so the records are
// bounded by the overflow seats in use.
struct OverflowSeat {
    Shard* shard = nullptr;
    Connection* connection = nullptr;      // set, cleared when it ends, and read on the shard's thread
    std::atomic<bool> asked{false};        // it sent a request: its seat is not taken for another
    std::atomic<bool> released{false};     // its seat was given back, or taken for another
};

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
    s.patches_sent = counters_.patches_sent;
    s.whole_docs_to_patch_clients = counters_.whole_docs_to_patch_clients;
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

constexpr std::chrono::milliseconds kHealthTimeout{1000};  // /healthz's wait for Redis's PONG
// An overflow seat's connection sends its request within this (a health check sends it at once),
// or is closed: a client cannot hold the seats kept for /healthz with silent sockets.
constexpr std::chrono::milliseconds kOverflowRequestTimeout{1000};

constexpr const char* kTooManyConnections =
    "this gateway holds --max-connections connections: retry later, or raise --max-connections";

// One HTTP connection: reads a request, has the router decide, writes the answer or hands the
// socket on (SSE, WebSocket); keep-alive until the client closes or idles.
class HttpSession : public Connection, public std::enable_shared_from_this<HttpSession> {
public:
    // `overflow`: the record of an Overflow seat, through which the acceptor may take the seat back.
    HttpSession(Shard& shard, Seat seat, Socket socket, std::shared_ptr<OverflowSeat> overflow = nullptr)
        : Connection(shard, seat), socket_(std::move(socket)), overflow_(std::move(overflow)) {}
    ~HttpSession() override {
        // A seat the acceptor took back for a newer connection went with its count: not given back
        // again (~Connection gives back the seat still held).
        if (overflow_ && seat() == Seat::Overflow && overflow_->released.exchange(true)) take_seat();
        if (overflow_) overflow_->connection = nullptr;  // an eviction posted now finds it gone
    }

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
        // A connection that sends no request soon holds a slot for nothing: --idle-timeout (an
        // overflow seat's, kOverflowRequestTimeout).
        deadline_ = steady::now() + std::min(shard_.options().request_timeout, shard_.options().idle_timeout);
        if (seat() == Seat::Overflow) deadline_ = std::min(deadline_, steady::now() + kOverflowRequestTimeout);
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
                                                     : "the request is not valid HTTP/1.1: " + ec.message());
            }
            self->route(self->parser_->release());
        });
    }

    void respond(Response res, bool keep_alive) {
        // An overflow seat answers one request: the next one waits for a seat like any other.
        res.keep_alive(keep_alive && seat() != Seat::Overflow);
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

    void respond_error(unsigned status, std::string_view code, const std::string& message) {
        respond(error_answer(nullptr, shard_.options(), status, code, message), false);
    }

    void route(Request req) {
        // It asked something: the acceptor no longer takes its overflow seat for another.
        if (overflow_) overflow_->asked = true;
        head_ = req.method() == http::verb::head;
        RouteContext ctx{shard_.options(), shard_.verifier(), seat() == Seat::Overflow, wall_clock::now()};
        Routed routed = route_request(req, ctx);
        if (routed.refused) ++shard_.counters().refused;
        if (routed.refused_connection) ++shard_.counters().refused_connections;
        switch (routed.kind) {
            case Routed::Kind::Answer:
                if (routed.as_is) return respond_head(std::move(routed.response));
                return respond(std::move(routed.response), routed.response.keep_alive());
            case Routed::Kind::ReadDoc: return read_doc(std::move(req), std::move(routed.channel));
            case Routed::Kind::Health: return healthz(std::move(req));
            case Routed::Kind::Sse:
                handed_off_ = true;
                return start_sse(shard_, take_seat(), std::move(socket_), req, std::move(routed.channels),
                                 std::move(routed.floors), routed.expires, routed.patches);
            case Routed::Kind::WebSocket:
                handed_off_ = true;
                return start_websocket(shard_, take_seat(), std::move(socket_), std::move(req), std::move(routed.caller),
                                       routed.patches);
        }
    }

    // A HEAD answer keeps its Content-Length: sent as is, without prepare_payload.
    void respond_head(Response res) {
        if (seat() == Seat::Overflow) res.keep_alive(false);
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

    // Redis's state is a PING's round trip to every node (answered within kHealthTimeout), not
    // the last thing the subscriber saw: a frozen Redis still completes TCP connects and takes writes.
    void healthz(Request req) {
        auto self = shared_from_this();
        auto shared_req = std::make_shared<Request>(std::move(req));
        reading_ = true;
        deadline_ = steady::now() + shard_.options().request_timeout;
        shard_.hub().health(kHealthTimeout, [self, shared_req](bool up, std::string why) {
            self->reading_ = false;
            if (self->closed_) return;
            Response res = health_answer(*shared_req, self->shard_.options(), up, why, self->shard_.stats(),
                                         self->shard_.hub().stats());
            self->respond(std::move(res), shared_req->keep_alive());
        });
    }

    void read_doc(Request req, std::string channel) {
        auto self = shared_from_this();
        auto shared_req = std::make_shared<Request>(std::move(req));
        reading_ = true;  // the request's deadline covers the read from Redis
        deadline_ = steady::now() + shard_.options().request_timeout;
        shard_.hub().read(channel, [self, shared_req, channel](DocPtr doc, std::string error) {
            self->reading_ = false;
            if (self->closed_) return;
            self->respond(doc_answer(*shared_req, self->shard_.options(), channel, doc, error), shared_req->keep_alive());
        });
    }

    Socket socket_;
    beast::flat_buffer buffer_{20 * 1024};  // above the header limit, so the parser reports it
    std::optional<http::request_parser<http::string_body>> parser_;
    steady::time_point deadline_{};
    bool reading_ = false;
    bool writing_ = false;
    bool closed_ = false;
    bool handed_off_ = false;
    bool head_ = false;  // the request being answered is a HEAD: the answer's header alone goes out
    // An Overflow seat's record, shared with the acceptor. Never handed to a stream: on such a
    // seat the router answers only /healthz, so the seat ends with this session.
    std::shared_ptr<OverflowSeat> overflow_;
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

void Server::prune_overflow_seats() {
    std::erase_if(overflow_seats_, [](const auto& r) { return r->released.load(); });
}

bool Server::evict_silent_overflow() {
    for (auto it = overflow_seats_.begin(); it != overflow_seats_.end(); ++it) {
        auto record = *it;
        if (record->asked) continue;
        if (record->released.exchange(true)) continue;  // it ended just now: its seat is free again
        overflow_seats_.erase(it);
        // Its seat is this connection's now; it is closed on its own thread (posted after the
        // post that made it, so it exists by then).
        asio::post(record->shard->io(), [record] {
            if (record->connection) record->connection->shut();
        });
        ++counters_.idle_disconnects;
        log_debug("gateway", "closed a silent connection on a /healthz seat past --max-connections for a new one");
        return true;
    }
    return false;
}

void Server::accept() {
    // Each connection goes to the next shard, and lives on its thread from the start.
    Shard& shard = *shards_[next_shard_++ % shards_.size()];
    acceptor_.async_accept(shard.io(), [this, &shard](boost::system::error_code ec, Socket socket) {
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
        prune_overflow_seats();
        Seat seat = Seat::None;
        if (counters_.connections < options_.max_connections) {
            ++counters_.connections;
            seat = Seat::Counted;
        } else if (counters_.overflow < kOverflowSeats) {
            // Full: a few more connections may still ask for /healthz, so that a load balancer
            // sees a live gateway; anything else they ask is answered 503.
            ++counters_.overflow;
            seat = Seat::Overflow;
        } else if (evict_silent_overflow()) {
            // Those are full too: the oldest whose connection has not asked anything yet passes
            // its seat (and its count) on to this one.
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
            std::shared_ptr<OverflowSeat> record;
            if (seat == Seat::Overflow) {
                record = std::make_shared<OverflowSeat>();
                record->shard = &shard;
                overflow_seats_.push_back(record);
            }
            asio::post(shard.io(), [&shard, seat, record, socket = std::move(socket)]() mutable {
                auto session = std::make_shared<HttpSession>(shard, seat, std::move(socket), record);
                if (record) record->connection = session.get();
                session->start();
            });
        }
        accept();
    });
}

}  // namespace docsync::gateway
