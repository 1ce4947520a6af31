// Server-Sent Events streams: one request's channels, each doc an event, until the client leaves,
// its token expires or it is too slow.
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include <array>

#include "common/log.hpp"
#include "gateway/session.hpp"

namespace docsync::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
using wall_clock = std::chrono::system_clock;

namespace {

class SseStream : public Connection, public Follower, public std::enable_shared_from_this<SseStream> {
public:
    SseStream(Shard& shard, Seat seat, tcp::socket socket, wall_clock::time_point expires)
        : Connection(shard, seat), socket_(std::move(socket)), expires_(expires) {
        ++shard_.counters().sse_streams;
    }
    ~SseStream() override {
        unfollow_all();
        --shard_.counters().sse_streams;
    }

    void start(const Request& req, std::vector<std::string> channels, std::vector<std::optional<DocVersion>> floors) {
        bound_send_buffer(socket_);
        for (std::size_t i = 0; i < channels.size(); ++i) outbox_.add(channels[i], floors[i]);
        auto res = std::make_shared<http::response<http::empty_body>>(http::status::ok, req.version());
        res->set(http::field::content_type, "text/event-stream");
        res->set(http::field::cache_control, "no-cache");
        res->set("X-Accel-Buffering", "no");  // proxies: pass each event on at once
        res->keep_alive(false);
        if (auto it = req.find(http::field::origin); it != req.end())
            add_cors(*res, shard_.options(), std::string_view(it->value().data(), it->value().size()));
        auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*res);
        writing_ = true;
        write_started_ = steady::now();
        auto self = shared_from_this();
        http::async_write_header(socket_, *serializer, [self, res, serializer](beast::error_code ec, std::size_t) {
            self->writing_ = false;
            if (ec) return self->close(Ending::Graceful);
            self->last_write_ = steady::now();
            // The browser reconnects after 1 s when the stream ends.
            self->control_.push_back("retry: 1000\n\n");
            for (const auto& slot : self->outbox_.slots()) self->shard_.hub().follow(slot.channel, self.get());
            self->following_ = true;
            self->pump();
            self->watch_for_close();
        });
    }

    void on_doc(const DocPtr& doc) override {
        if (!closed_ && outbox_.offer(doc)) pump();
    }
    // A notice is an event of its own (`notice`): the stream goes on.
    void on_notice(const std::string& channel, const std::string& code, const std::string& message) override {
        if (closed_ || expiring_ || control_.size() >= 64) return;
        control_.push_back("event: notice\ndata: " + error_json(code, message, channel) + "\n\n");
        pump();
    }

    void tick(steady::time_point now, wall_clock::time_point wall) override {
        if (closed_) return;
        if (writing_ && now - write_started_ >= shard_.options().slow_client_timeout) {
            ++shard_.counters().slow_disconnects;
            log_info("gateway", "closed an SSE stream whose client took no bytes for " +
                                    std::to_string(shard_.options().slow_client_timeout.count()) + " ms (too slow)");
            return close(Ending::Abortive);
        }
        if (expiring_) return close(Ending::Abortive);  // the reason did not go out within a tick: cut off
        if (wall >= expires_) {
            // Nothing more goes out but the reason: pending docs are dropped, not flushed, and
            // after kEndGrace the connection is reset, dropping what the kernel still holds.
            ++shard_.counters().expired_disconnects;
            expires_ = wall_clock::time_point::max();
            expiring_ = true;
            unfollow_all();
            outbox_.clear();
            control_.clear();
            control_.push_back("event: stream-error\ndata: " +
                               error_json("token_expired", "the token has expired: reconnect with a new one") + "\n\n");
            close_after_flush_ = true;
            pump();
            auto timer = std::make_shared<asio::steady_timer>(socket_.get_executor(), kEndGrace);
            timer->async_wait([self = shared_from_this(), timer](const boost::system::error_code&) {
                self->close(Ending::Abortive);
            });
            return;
        }
        if (!writing_ && now - last_write_ >= shard_.options().heartbeat) {
            control_.push_back(": ping\n\n");
            pump();
        }
    }

    void shut() override { close(Ending::Graceful); }

private:
    void unfollow_all() {
        if (!following_) return;
        following_ = false;
        for (const auto& slot : outbox_.slots()) shard_.hub().unfollow(slot.channel, this);
    }

    void close(Ending how) {
        if (closed_) return;
        closed_ = true;
        unfollow_all();
        end_socket(socket_, how);
    }

    // A client sends nothing on an event stream: the read ends when it goes away.
    void watch_for_close() {
        auto self = shared_from_this();
        socket_.async_read_some(asio::buffer(&read_byte_, 1), [self](beast::error_code ec, std::size_t) {
            if (ec || ++self->bytes_read_ > 4096) return self->close(Ending::Graceful);
            self->watch_for_close();
        });
    }

    void pump() {
        if (writing_ || closed_) return;
        auto self = shared_from_this();
        auto done = [self](beast::error_code ec, std::size_t) {
            self->writing_ = false;
            self->sending_.reset();
            if (ec) return self->close(Ending::Graceful);
            self->last_write_ = steady::now();
            self->pump();
        };
        if (!control_.empty()) {
            current_ = pop_front(control_);
            start_write();
            asio::async_write(socket_, asio::buffer(current_), done);
            return;
        }
        if (DocPtr doc = outbox_.next()) {
            // A one-channel stream's id is the doc's version: the head every such stream shares.
            // Several channels: the cursor of them all, this stream's own.
            if (outbox_.size() == 1) {
                head_.clear();
            } else {
                head_ = "event: doc\nid: " + format_cursor(outbox_.floors()) + "\ndata: ";
            }
            sending_ = std::move(doc);
            std::array<asio::const_buffer, 3> buffers{
                asio::buffer(head_.empty() ? sending_->sse_head : head_), asio::buffer(sending_->sse_data()),
                asio::buffer("\n\n", 2)};
            start_write();
            asio::async_write(socket_, buffers, done);
            return;
        }
        if (close_after_flush_) {
            // The reason is in the kernel's (bounded) buffer: FIN after it, and the grace timer
            // resets the connection if the client has not taken it by then.
            close_after_flush_ = false;
            boost::system::error_code ec;
            socket_.shutdown(tcp::socket::shutdown_send, ec);
        }
    }

    void start_write() {
        writing_ = true;
        write_started_ = steady::now();
    }

    tcp::socket socket_;
    wall_clock::time_point expires_;
    Outbox outbox_;
    ControlQueue control_;
    std::string current_;
    std::string head_;
    DocPtr sending_;
    steady::time_point write_started_{};
    steady::time_point last_write_{};
    char read_byte_ = 0;
    std::size_t bytes_read_ = 0;
    bool writing_ = false;
    bool closed_ = false;
    bool close_after_flush_ = false;
    bool expiring_ = false;  // the token expired: the stream ends within kEndGrace
    bool following_ = false;
};

}  // namespace

void start_sse(Shard& shard, Seat seat, tcp::socket socket, const Request& req, std::vector<std::string> channels,
               std::vector<std::optional<DocVersion>> floors, wall_clock::time_point expires) {
    auto stream = std::make_shared<SseStream>(shard, seat, std::move(socket), expires);
    stream->start(req, std::move(channels), std::move(floors));
}

}  // namespace docsync::gateway
