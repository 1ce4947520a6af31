// Server-Sent Events streams: one request's channels, each doc an event, until the client leaves,
// its token expires or it is too slow. The framing only; delivery is the shared core (delivery.hpp).
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <cstdint>

#include "gateway/delivery.hpp"

namespace docsync::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
using wall_clock = std::chrono::system_clock;

namespace {

constexpr std::size_t kMaxNotices = 64;  // notices not yet written: more are dropped
// A client sends nothing on an event stream: one that sends more than this is closed.
constexpr std::uint16_t kMaxReadBytes = 4096;

class SseStream : public Delivery {
public:
    SseStream(Shard& shard, Seat seat, Socket socket, wall_clock::time_point expires, bool patches)
        : Delivery(shard, seat), socket_(std::move(socket)), expires_(expires) {
        patches_ = patches;
        ++shard_.counters().sse_streams;
    }
    ~SseStream() override { --shard_.counters().sse_streams; }

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
        start_write();
        auto self = self_ptr();
        http::async_write_header(socket_, *serializer, [self, res, serializer](beast::error_code ec, std::size_t) {
            self->writing_ = false;
            if (ec) return self->close(Ending::Graceful);
            if (self->closed_ || self->ending_) return;  // shut while the head was written
            self->last_write_ = steady::now();
            // The browser reconnects after 1 s when the stream ends.
            self->control_.push_back("retry: 1000\n\n");
            for (const auto& slot : self->outbox_.slots()) self->follow(slot.channel);
            self->pump();
            self->watch_for_close();
        });
    }

    // A notice is an event of its own (`notice`): the stream goes on.
    void on_notice(const std::string& channel, const std::string& code, const std::string& message) override {
        if (closed_ || ending_ || control_.size() >= kMaxNotices) return;
        send("event: notice\ndata: " + error_json(code, message, channel) + "\n\n");
    }

    void tick(steady::time_point now, wall_clock::time_point wall) override {
        if (tick_closes(now)) return;
        if (wall >= expires_) {
            ++shard_.counters().expired_disconnects;
            expires_ = wall_clock::time_point::max();
            return end("event: stream-error\ndata: " +
                       error_json("token_expired", "the token has expired: reconnect with a new one") + "\n\n");
        }
        if (!writing_ && now - last_write_ >= shard_.options().heartbeat) send(": ping\n\n");
    }

    void shut() override { close(Ending::Graceful); }

private:
    const char* kind() const override { return "an SSE stream"; }

    std::shared_ptr<SseStream> self_ptr() { return std::static_pointer_cast<SseStream>(shared_from_this()); }

    void write_message(const std::string& text, WriteDone done) override {
        asio::async_write(socket_, asio::buffer(text), [done = std::move(done)](beast::error_code ec, std::size_t) { done(ec); });
    }

    void write_doc(const DocPtr& doc, bool patch, WriteDone done) override {
        // A one-channel stream's id is the doc's version: the head every such stream shares.
        // Several channels: the cursor of them all, this stream's own (in current_, free while a
        // doc is written). A patch is an event of its own name with the same id.
        if (outbox_.size() == 1) current_.clear();
        else current_ = (patch ? "event: patch\nid: " : "event: doc\nid: ") + format_cursor(outbox_.floors()) + "\ndata: ";
        const std::string& head = patch ? doc->patch_sse_head : doc->sse_head;
        std::array<asio::const_buffer, 3> buffers{asio::buffer(current_.empty() ? head : current_),
                                                   asio::buffer(patch ? doc->patch_sse_data() : doc->sse_data()),
                                                   asio::buffer("\n\n", 2)};
        asio::async_write(socket_, buffers, [done = std::move(done)](beast::error_code ec, std::size_t) { done(ec); });
    }

    void write_end() override {
        // The reason is in the kernel's (bounded) buffer: FIN after it; the grace timer resets
        // the connection if the client has not taken it by then.
        boost::system::error_code ec;
        socket_.shutdown(tcp::socket::shutdown_send, ec);
    }

    Socket& socket() override { return socket_; }

    // A client sends nothing on an event stream: the read ends when it goes away.
    void watch_for_close() {
        auto self = self_ptr();
        socket_.async_read_some(asio::buffer(&read_byte_, 1), [self](beast::error_code ec, std::size_t) {
            if (ec || ++self->bytes_read_ > kMaxReadBytes) return self->close(Ending::Graceful);
            self->watch_for_close();
        });
    }

    Socket socket_;
    wall_clock::time_point expires_;
    char read_byte_ = 0;
    std::uint16_t bytes_read_ = 0;  // closed past kMaxReadBytes
};

#if defined(__GLIBCXX__) && UINTPTR_MAX == UINT64_MAX
// The budget of an idle stream (docs/gateway.md): the Delivery core, the socket, the expiry and
// the reading bytes, nothing more. On LP64 libstdc++, where it was measured.
static_assert(sizeof(SseStream) <= 256, "an SSE stream outgrew its budget of docs/gateway.md");
#endif

}  // namespace

void start_sse(Shard& shard, Seat seat, Socket socket, const Request& req, std::vector<std::string> channels,
               std::vector<std::optional<DocVersion>> floors, wall_clock::time_point expires, bool patches) {
    auto stream = std::make_shared<SseStream>(shard, seat, std::move(socket), expires, patches);
    stream->start(req, std::move(channels), std::move(floors));
}

}  // namespace docsync::gateway
