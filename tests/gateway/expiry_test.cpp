// docsync-gateway ending a stream at its token's expiry while the client reads slowly: what the
// kernel already holds for it is dropped (the connection is reset after the reason), so the
// stream ends within a second, whatever is pending, over SSE and WebSocket alike.
#include <atomic>
#include <future>

#include "gateway_setup.hpp"

namespace {

using steady = std::chrono::steady_clock;

// A token opening `pattern` that expires at `exp` (whole seconds of the wall clock).
std::string token_until(const std::string& pattern, std::chrono::seconds exp) {
    jwt_t* jwt = nullptr;
    jwt_new(&jwt);
    jwt_add_grants_json(jwt, ("{\"channels\":[\"" + pattern + "\"]}").c_str());
    jwt_add_grant_int(jwt, "exp", static_cast<long>(exp.count()));
    jwt_set_alg(jwt, JWT_ALG_HS256, reinterpret_cast<const unsigned char*>(kSecret.data()),
                static_cast<int>(kSecret.size()));
    char* text = jwt_encode_str(jwt);
    std::string token = text ? text : "";
    std::free(text);
    jwt_free(jwt);
    return token;
}

// What a slow reader got: bytes after a point in time, and when the stream ended (reset or FIN).
struct SlowRead {
    std::size_t bytes_after = 0;
    std::optional<std::chrono::system_clock::time_point> ended;
};

// Reads at most 4 KB every 2 ms from `socket` until it ends or `until`; counts what came after `after`.
SlowRead read_slowly(gw_tcp::socket& socket, std::chrono::system_clock::time_point after,
                     std::chrono::system_clock::time_point until) {
    SlowRead out;
    socket.non_blocking(true);
    char chunk[4096];
    while (std::chrono::system_clock::now() < until) {
        std::this_thread::sleep_for(2ms);
        boost::system::error_code ec;
        auto n = socket.read_some(gw_asio::buffer(chunk), ec);
        if (ec == gw_asio::error::would_block) continue;
        if (std::chrono::system_clock::now() > after) out.bytes_after += n;
        if (ec) {
            out.ended = std::chrono::system_clock::now();
            break;
        }
    }
    return out;
}

}  // namespace

TEST_CASE("gateway: a token's expiry ends a slow reader's stream within a second, the kernel's backlog dropped") {
    Setup s;
    const std::string channel = "db:flood:1";
    s.publish(channel, 0, 0x10);
    auto exp = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()) + 5s;
    const auto expires = std::chrono::system_clock::time_point(exp);
    const std::string token = token_until("db:flood:*", exp);

    // Readers of 4 KB at a time with a small receive buffer: the gateway's side holds the backlog.
    gw_asio::io_context io;
    gw_tcp::socket sse(io);
    sse.open(gw_tcp::v4());
    sse.set_option(gw_asio::socket_base::receive_buffer_size(4096));
    sse.connect(gw_tcp::endpoint(gw_asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(s.gateway.port())));
    gw_asio::write(sse, gw_asio::buffer("GET /v1/sse?channel=" + channel + "&token=" + token +
                                        " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    gw_beast::websocket::stream<gw_tcp::socket> ws(io);
    auto& ws_socket = gw_beast::get_lowest_layer(ws);
    ws_socket.open(gw_tcp::v4());
    ws_socket.set_option(gw_asio::socket_base::receive_buffer_size(4096));
    ws_socket.connect(gw_tcp::endpoint(gw_asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(s.gateway.port())));
    ws.handshake("127.0.0.1", "/v1/ws?token=" + token);
    ws.text(true);
    ws.write(gw_asio::buffer(R"({"type":"subscribe","channel":")" + channel + "\"}"));

    // 20 kB versions as fast as Redis takes them, before and after the expiry.
    std::atomic<bool> stop{false};
    std::thread publisher([&] {
        publish::RedisSink sink(s.redis.address());
        for (std::uint64_t n = 1; !stop; ++n) sink.publish(channel, doc_of(static_cast<int>(n), 20 * 1024), DocVersion{1, 0x10 + n});
    });
    struct Joiner {
        std::atomic<bool>& stop;
        std::thread& t;
        ~Joiner() {
            stop = true;
            if (t.joinable()) t.join();
        }
    } joiner{stop, publisher};

    // The backlog builds for 4 s; then what still arrives after the expiry is what the gateway
    // had handed the kernel, cut off with the reset.
    const auto until = expires + 4s;
    auto sse_read = std::async(std::launch::async, [&] { return read_slowly(sse, expires, until); });
    auto ws_read = std::async(std::launch::async, [&] { return read_slowly(ws_socket, expires, until); });
    SlowRead on_sse = sse_read.get(), on_ws = ws_read.get();
    stop = true;
    for (auto [name_bound, r] : {std::pair{std::string("SSE"), on_sse}, std::pair{std::string("WebSocket"), on_ws}}) {
        const std::string name = name_bound;  // INFO takes a variable, not a structured binding
        INFO(name);
        MESSAGE(name << ": " << r.bytes_after << " bytes read after the expiry; ended at exp"
                     << (r.ended ? std::to_string(std::chrono::duration<double>(*r.ended - expires).count()) + " s"
                                 : std::string(" + more than 4 s")));
        REQUIRE(r.ended);
        CHECK(*r.ended - expires < 1500ms);
        // The kernel's bounded send buffer (64 KiB, doubled) and the reader's own, at most.
        CHECK(r.bytes_after < 256 * 1024);
    }
}
