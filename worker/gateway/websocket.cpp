// WebSocket connections: one socket follows many channels, with JSON messages both ways. The
// framing and the client's requests only; delivery is the shared core (delivery.hpp).
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>


#include "common/log.hpp"
#include "gateway/delivery.hpp"

namespace docsync::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
using wall_clock = std::chrono::system_clock;

namespace {

constexpr std::size_t kMaxMessageBytes = 64 * 1024;  // a client's message; tokens are at most 8 KB
constexpr std::size_t kMaxControlPending = 256;      // replies not yet taken: more is a client not reading

// {"type":"error","error":CODE,…}: error_json with the message's type in front.
std::string ws_error(std::string_view code, std::string_view message, std::string_view channel = {}) {
    return "{\"type\":\"error\"," + error_json(code, message, channel).substr(1);
}

class WsSession : public Delivery {
public:
    WsSession(Shard& shard, Seat seat, Socket socket, Caller caller, bool patches)
        : Delivery(shard, seat), ws_(std::move(socket)), caller_(std::move(caller)) {
        patches_ = patches;
        ++shard_.counters().websockets;
    }
    ~WsSession() override { --shard_.counters().websockets; }

    void start(Request req) {
        websocket::stream_base::timeout timeout{};
        timeout.handshake_timeout = std::chrono::seconds(10);
        // Beast pings an idle client at half this and drops one that answers nothing for all of it.
        timeout.idle_timeout = 2 * shard_.options().heartbeat;
        timeout.keep_alive_pings = true;
        ws_.set_option(timeout);
        ws_.read_message_max(kMaxMessageBytes);
        bound_send_buffer(beast::get_lowest_layer(ws_));
        ws_.set_option(websocket::stream_base::decorator(
            [](websocket::response_type& res) { res.set(beast::http::field::server, "docsync-gateway"); }));
        auto shared_req = std::make_shared<Request>(std::move(req));
        auto self = self_ptr();
        ws_.async_accept(*shared_req, [self, shared_req](beast::error_code ec) {
            if (ec) return self->close(Ending::Graceful);
            self->open_ = true;
            self->idle_since_ = steady::now();
            if (self->caller_.refusal) {
                // The token given at the upgrade was refused: the reason, then the close.
                self->close_reason_ = self->caller_.refusal->code;
                self->close_after_flush_ = true;
                return self->send_control(ws_error(self->caller_.refusal->code, self->caller_.refusal->message));
            }
            self->read();
        });
    }

    void on_notice(const std::string& channel, const std::string& code, const std::string& message) override {
        if (!closed_ && !ending_ && outbox_.find(channel)) send_control(ws_error(code, message, channel));
    }

    void tick(steady::time_point now, wall_clock::time_point wall) override {
        if (!open_ || tick_closes(now)) return;
        if (outbox_.size() == 0 && now - idle_since_ >= shard_.options().idle_timeout) {
            // A socket that follows nothing holds a connection slot for nothing: the slots go to
            // clients that follow something.
            ++shard_.counters().idle_disconnects;
            return end_with("idle_timeout", "this connection followed no channel for " +
                                                std::to_string(shard_.options().idle_timeout.count()) +
                                                " ms (--idle-timeout): subscribe once connected, and close "
                                                "the socket when no channel is followed");
        }
        if (caller_.grant && wall >= caller_.grant->expires) {
            caller_.grant.reset();
            if (!relies_on_token()) return;  // only public channels: the connection needs no token
            ++shard_.counters().expired_disconnects;
            return end_with("token_expired", "the token has expired: reconnect with a new one, or send "
                                             "{\"type\":\"auth\",\"token\":…} before it expires");
        }
    }

    void shut() override { close(Ending::Graceful); }

private:
    const char* kind() const override { return "a WebSocket"; }

    std::shared_ptr<WsSession> self_ptr() { return std::static_pointer_cast<WsSession>(shared_from_this()); }

    // Ends the connection with `code` and `message` (an error message, then the close frame).
    void end_with(std::string code, const std::string& message) {
        close_reason_ = code;
        end(ws_error(code, message));
    }

    bool relies_on_token() const {
        for (const auto& s : outbox_.slots())
            if (needs_token(shard_.options().public_channels, s.channel)) return true;
        return false;
    }

    bool ready() const override { return open_; }

    void write_message(const std::string& text, WriteDone done) override {
        ws_.text(true);
        ws_.async_write(asio::buffer(text), [done = std::move(done)](beast::error_code ec, std::size_t) { done(ec); });
    }

    void write_doc(const DocPtr& doc, bool patch, WriteDone done) override {
        ws_.text(true);
        ws_.async_write(asio::buffer(patch ? doc->patch_ws_message : doc->ws_message), [done = std::move(done)](beast::error_code ec, std::size_t) { done(ec); });
    }

    void write_end() override {
        start_write();
        ws_.async_close(websocket::close_reason(websocket::close_code::policy_error, close_reason_),
                        [self = self_ptr()](beast::error_code) {
                            self->writing_ = false;
                            self->close(Ending::Graceful);
                        });
    }

    Socket& socket() override { return beast::get_lowest_layer(ws_); }

    void read() {
        auto self = self_ptr();
        ws_.async_read(buffer_, [self](beast::error_code ec, std::size_t) {
            if (ec) return self->close(Ending::Graceful);
            if (!self->ws_.got_text()) {
                self->send_control(ws_error("bad_request", "messages are JSON text, not binary"));
            } else {
                auto data = self->buffer_.cdata();
                self->handle(std::string_view(static_cast<const char*>(data.data()), data.size()));
            }
            self->buffer_.consume(self->buffer_.size());
            if (!self->closed_) self->read();
        });
    }

    void handle(std::string_view text) {
        // Beast may still complete a read from frames it buffered before close(): a connection
        // that is ending or closed handles nothing more.
        if (ending_ || closed_) return;
        auto parsed = parse_client_message(text);
        if (!parsed.message) return send_control(ws_error("bad_request", parsed.error));
        ClientMessage& m = *parsed.message;
        switch (m.type) {
            case ClientMessage::Type::Subscribe: return subscribe(m.channel, m.after);
            case ClientMessage::Type::Unsubscribe: return unsubscribe(m.channel);
            case ClientMessage::Type::Auth: return reauthorize(m.token);
        }
    }

    void subscribe(const std::string& channel, std::optional<DocVersion> after) {
        if (auto why = channel_error(channel); !why.empty())
            return send_control(ws_error("bad_request", why, channel.substr(0, 200)));
        Verdict verdict = authorize(caller_, shard_.options().public_channels, channel);
        if (!verdict.allowed) {
            ++shard_.counters().refused;
            return send_control(ws_error(verdict.code, verdict.message, channel));
        }
        if (Outbox::Slot* slot = outbox_.find(channel)) {
            // Subscribed already: a newer `after` moves the floor up, never down.
            // A doc already waiting at or below it is dropped.
            if (after) outbox_.raise_floor(*slot, *after);
            return send_control(subscribed_json(channel));
        }
        if (outbox_.size() >= shard_.options().max_channels)
            return send_control(ws_error("too_many_channels",
                                           "this connection follows " + std::to_string(outbox_.size()) +
                                               " channels, the most one may (--max-channels): unsubscribe one first",
                                           channel));
        outbox_.add(channel, after);
        send_control(subscribed_json(channel));  // may close the connection (a client not reading)
        follow(channel);                         // refused once closed: the hub never keeps it
    }

    void unsubscribe(const std::string& channel) {
        if (!outbox_.find(channel))
            return send_control(ws_error("bad_request", "not subscribed to this channel", channel.substr(0, 200)));
        shard_.hub().unfollow(channel, this);
        outbox_.remove(channel);
        if (outbox_.size() == 0) idle_since_ = steady::now();
        send_control("{\"type\":\"unsubscribed\",\"channel\":" + json_string(channel) + "}");
    }

    // A new token for the connection (a refreshed one before the old expires). Channels it no longer
    // opens are dropped, each with an error.
    void reauthorize(const std::string& token) {
        Caller fresh = identify(shard_.verifier(), token, wall_clock::now());
        if (fresh.refusal) {
            ++shard_.counters().refused;
            return send_control(ws_error(fresh.refusal->code, fresh.refusal->message + " (the previous token stays in use)"));
        }
        caller_ = std::move(fresh);
        std::vector<std::string> dropped;
        for (const auto& s : outbox_.slots())
            if (!authorize(caller_, shard_.options().public_channels, s.channel).allowed) dropped.push_back(s.channel);
        for (const auto& channel : dropped) {
            shard_.hub().unfollow(channel, this);
            outbox_.remove(channel);
            send_control(ws_error("forbidden", "the new token does not open this channel: unsubscribed", channel));
        }
        if (!dropped.empty() && outbox_.size() == 0) idle_since_ = steady::now();
        send_control("{\"type\":\"authorized\"}");
    }

    static std::string subscribed_json(const std::string& channel) {
        return "{\"type\":\"subscribed\",\"channel\":" + json_string(channel) + "}";
    }

    void send_control(std::string message) {
        if (closed_) return;
        if (control_.size() >= kMaxControlPending) {
            log_info("gateway", "closed a WebSocket that sends requests without reading the replies");
            ++shard_.counters().slow_disconnects;
            return close(Ending::Abortive);
        }
        send(std::move(message));
    }

    websocket::stream<Socket> ws_;
    beast::flat_buffer buffer_;
    Caller caller_;
    std::string close_reason_;
    steady::time_point idle_since_{};  // since when no channel is followed (when none is)
    bool open_ = false;
};

}  // namespace

void start_websocket(Shard& shard, Seat seat, Socket socket, Request req, Caller caller, bool patches) {
    auto session = std::make_shared<WsSession>(shard, seat, std::move(socket), std::move(caller), patches);
    session->start(std::move(req));
}

}  // namespace docsync::gateway
