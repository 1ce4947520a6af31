// docsync-gateway under hostile and unlucky clients: a token's expiry on busy channels, a frozen
// Redis, tokens dated past 2262, idle sockets holding the slots, a bursting crowd, `after` on a
// doc already waiting, HEAD, envelopes holding line breaks, Redis publishing faster than the hub
// parses.
#include <signal.h>

#include <atomic>
#include <optional>

#include "gateway_setup.hpp"

namespace {

// A token with exactly these claims (besides "channels").
std::string mint_claims(const std::string& claims_json) {
    jwt_t* jwt = nullptr;
    jwt_new(&jwt);
    jwt_add_grants_json(jwt, claims_json.c_str());
    jwt_set_alg(jwt, JWT_ALG_HS256, reinterpret_cast<const unsigned char*>(kSecret.data()),
                static_cast<int>(kSecret.size()));
    char* text = jwt_encode_str(jwt);
    std::string token = text ? text : "";
    std::free(text);
    jwt_free(jwt);
    return token;
}

// A field of /healthz's JSON (-1 when absent).
long health_field(int port, const std::string& name) {
    auto body = http_get(port, "/healthz").body;
    rapidjson::Document d;
    d.Parse(body.data(), body.size());
    if (!d.IsObject() || !d.HasMember(name.c_str()) || !d[name.c_str()].IsNumber()) return -1;
    return d[name.c_str()].GetInt64();
}

// A raw connection: writes the bytes given, reads whatever comes until `timeout` or the end.
struct RawClient {
    gw_asio::io_context io;
    gw_tcp::socket socket{io};
    explicit RawClient(int port, int receive_buffer = 0) {
        socket.open(gw_tcp::v4());
        if (receive_buffer > 0) socket.set_option(gw_asio::socket_base::receive_buffer_size(receive_buffer));
        socket.connect(gw_tcp::endpoint(gw_asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    }
    void write(const std::string& bytes) { gw_asio::write(socket, gw_asio::buffer(bytes)); }
    // What arrives within `timeout` (or until it holds `until`); `ended` tells whether the server closed.
    std::string read_for(std::chrono::milliseconds timeout, const std::string& until = {}, bool* ended = nullptr) {
        std::string out;
        auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            pollfd pfd{socket.native_handle(), POLLIN, 0};
            if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
            char chunk[65536];
            boost::system::error_code ec;
            auto n = socket.read_some(gw_asio::buffer(chunk), ec);
            out.append(chunk, n);
            if (ec) {
                if (ended) *ended = true;
                break;
            }
            if (!until.empty() && out.find(until) != std::string::npos) break;
        }
        return out;
    }
};

// A WebSocket that sends its subscriptions and then reads nothing (a slow client).
struct SilentWs {
    gw_asio::io_context io;
    gw_beast::websocket::stream<gw_tcp::socket> ws{io};
    SilentWs(int port, const std::string& target, int receive_buffer) {
        auto& s = gw_beast::get_lowest_layer(ws);
        s.open(gw_tcp::v4());
        s.set_option(gw_asio::socket_base::receive_buffer_size(receive_buffer));
        s.connect(gw_tcp::endpoint(gw_asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
        ws.handshake("127.0.0.1", target);
    }
    void send(const std::string& text) {
        ws.text(true);
        ws.write(gw_asio::buffer(text));
    }
    // The raw bytes left to read (frames unparsed: a server's frames are unmasked JSON text), until
    // the server closes or `timeout`.
    std::string drain(std::chrono::milliseconds timeout) {
        std::string out;
        auto& sock = gw_beast::get_lowest_layer(ws);
        auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            pollfd pfd{sock.native_handle(), POLLIN, 0};
            if (::poll(&pfd, 1, 100) <= 0) continue;
            char chunk[65536];
            boost::system::error_code ec;
            auto n = sock.read_some(gw_asio::buffer(chunk), ec);
            out.append(chunk, n);
            if (ec) break;
        }
        return out;
    }
};

// Every "n" in the doc events of raw SSE bytes or of raw WebSocket bytes.
std::vector<int> ns_in(const std::string& bytes) {
    std::vector<int> out;
    for (auto at = bytes.find("\"n\":"); at != std::string::npos; at = bytes.find("\"n\":", at + 4))
        out.push_back(std::atoi(bytes.c_str() + at + 4));
    return out;
}

}  // namespace

TEST_CASE("gateway: a token's expiry ends a slow client's stream on busy channels within a second, pending docs dropped") {
    Setup s({"--slow-client-timeout", "60s"});
    constexpr int kChannels = 40;
    // The token's exp is whole seconds: the expiry is that instant, 4 to 5 s from now.
    auto exp = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()) + 5s;
    auto token = mint_claims(R"({"channels":["db:busy:*"],"exp":)" + std::to_string(exp.count()) + "}");
    auto expires = std::chrono::system_clock::time_point(exp);
    std::string target = "/v1/sse?token=" + token;
    for (int c = 0; c < kChannels; ++c) target += "&channel=db:busy:" + std::to_string(c);
    for (int c = 0; c < kChannels; ++c) s.publish("db:busy:" + std::to_string(c), 0, 0x10);
    SseClient sse(s.gateway.port(), target, {}, 8192);
    REQUIRE(sse.status() == 200);
    SilentWs ws(s.gateway.port(), "/v1/ws?token=" + token, 8192);
    for (int c = 0; c < kChannels; ++c)
        ws.send(R"({"type":"subscribe","channel":"db:busy:)" + std::to_string(c) + "\"}");
    // Busy channels: versions keep coming on every one, before and after the expiry.
    std::atomic<bool> stop{false};
    std::atomic<int> published{0}, first_after{-1};
    std::thread publisher([&] {
        publish::RedisSink sink(s.redis.address());
        for (int n = 1; !stop; ++n) {
            sink.publish("db:busy:" + std::to_string(n % kChannels), doc_of(n, 16 * 1024),
                         DocVersion{1, 0x10 + static_cast<std::uint64_t>(n)});
            published = n;
            if (first_after < 0 && std::chrono::system_clock::now() > expires + 600ms) first_after = n;
        }
    });
    struct Joiner {
        std::atomic<bool>& stop;
        std::thread& t;
        ~Joiner() {
            stop = true;
            if (t.joinable()) t.join();
        }
    } joiner{stop, publisher};
    std::this_thread::sleep_until(expires - 1500ms);
    std::string before_expiry = http_get(s.gateway.port(), "/healthz").body;
    INFO(before_expiry);
    INFO(std::chrono::duration<double>(expires - std::chrono::system_clock::now()).count() << " s left; token " << token);
    REQUIRE(health_field(s.gateway.port(), "sse_streams") == 1);
    REQUIRE(health_field(s.gateway.port(), "websockets") == 1);
    // Within a second of the expiry both are gone, though neither read a byte.
    std::this_thread::sleep_until(expires + 1000ms);
    CHECK(health_field(s.gateway.port(), "sse_streams") == 0);
    CHECK(health_field(s.gateway.port(), "websockets") == 0);
    CHECK(health_field(s.gateway.port(), "expired_disconnects") == 2);
    stop = true;
    publisher.join();
    REQUIRE(first_after > 0);
    MESSAGE(published.load() << " versions published; the first one 0.6 s after the expiry: " << first_after.load());
    // What the client can still read was sent before that: no doc published after the expiry.
    int late = 0;
    while (auto e = sse.next(3000ms))
        if (e->event == "doc" && n_of(e->data) >= first_after) ++late;
    CHECK(sse.ended(100ms));
    std::string rest = ws.drain(5000ms);
    for (int n : ns_in(rest))
        if (n >= first_after) ++late;
    CHECK(late == 0);
}

TEST_CASE("gateway: /healthz is a round trip to Redis: a frozen Redis reads as down, within the probe's timeout") {
    Setup s;
    s.publish("db:order:42", 1, 0x100);
    SseClient sse(s.gateway.port(), "/v1/sse?channel=db:order:42&token=" + mint_token(kSecret, {"db:order:42"}));
    REQUIRE(sse.next_doc());
    REQUIRE(http_get(s.gateway.port(), "/healthz").status == 200);
    REQUIRE(::kill(s.redis.pid(), SIGSTOP) == 0);
    int up = 0, samples = 0;
    double slowest = 0;
    for (int i = 0; i < 8; ++i) {
        auto started = std::chrono::steady_clock::now();
        auto a = http_get(s.gateway.port(), "/healthz");
        slowest = std::max(slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        ++samples;
        if (a.status == 200 || a.body.find("\"redis\":\"up\"") != std::string::npos) ++up;
        else CHECK(a.body.find("\"redis\":\"down\"") != std::string::npos);
        std::this_thread::sleep_for(250ms);
    }
    ::kill(s.redis.pid(), SIGCONT);
    MESSAGE(up << " of " << samples << " samples said up while Redis was frozen; the slowest took " << slowest << " s");
    CHECK(up == 0);
    CHECK(slowest < 2.0);
    CHECK(eventually([&] { return http_get(s.gateway.port(), "/healthz").status == 200; }, 15s));
}

TEST_CASE("gateway: exp and nbf past the clock's end (2262) read as far in the future") {
    Setup s;
    s.publish("db:order:42", 1, 0x100);
    auto far_exp = mint_claims(R"({"channels":["db:order:42"],"exp":9999999999})");
    auto a = http_get(s.gateway.port(), "/v1/docs/db:order:42", {{"Authorization", bearer(far_exp)}});
    CHECK(a.status == 200);
    auto far_nbf = mint_claims(R"({"channels":["db:order:42"],"exp":9999999999,"nbf":9999999999})");
    auto b = http_get(s.gateway.port(), "/v1/docs/db:order:42", {{"Authorization", bearer(far_nbf)}});
    CHECK(b.status == 401);
    CHECK(error_of(b.body) == "token_not_yet_valid");
    auto huge = mint_claims(R"({"channels":["db:order:42"],"exp":1e300})");
    CHECK(http_get(s.gateway.port(), "/v1/docs/db:order:42", {{"Authorization", bearer(huge)}}).status == 200);
}

TEST_CASE("gateway: at --max-connections /healthz still answers, anything else is 503") {
    Setup s({"--public", "db:public:*", "--max-connections", "5"});
    // The start's own /healthz connections gone (the one asking counts itself).
    REQUIRE(eventually([&] { return health_field(s.gateway.port(), "connections") <= 1; }, 5s));
    std::vector<std::unique_ptr<WsClient>> held;
    for (int i = 0; i < 5; ++i) held.push_back(std::make_unique<WsClient>(s.gateway.port()));
    std::this_thread::sleep_for(200ms);
    for (int i = 0; i < 3; ++i) {
        auto h = http_get(s.gateway.port(), "/healthz");
        CHECK(h.status == 200);
        CHECK(h.body.find("\"redis\":\"up\"") != std::string::npos);
    }
    auto full = http_get(s.gateway.port(), "/v1/docs/db:public:1");
    CHECK(full.status == 503);
    CHECK(error_of(full.body) == "too_many_connections");
}

TEST_CASE("gateway: silent sockets past --max-connections cannot lock /healthz out") {
    Setup s({"--public", "db:public:*", "--max-connections", "2"});
    s.publish("db:public:1", 1, 0x100);
    REQUIRE(eventually([&] { return health_field(s.gateway.port(), "connections") <= 1; }, 5s));
    SseClient a(s.gateway.port(), "/v1/sse?channel=db:public:1");
    REQUIRE(a.next_doc());
    // The health check's own connection may not be closed on the gateway's side yet: until it is, a
    // second stream is one past --max-connections, refused at once.
    std::optional<SseClient> b;
    REQUIRE(eventually([&] {
        b.emplace(s.gateway.port(), "/v1/sse?channel=db:public:1");
        return b->next_doc(1000ms).has_value();
    }, 5s));
    // A client holds more sockets than the seats kept past --max-connections, and sends nothing.
    gw_asio::io_context io;
    std::vector<std::unique_ptr<gw_tcp::socket>> silent;
    for (int i = 0; i < 80; ++i) {
        silent.push_back(std::make_unique<gw_tcp::socket>(io));
        silent.back()->connect(gw_tcp::endpoint(gw_asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(s.gateway.port())));
    }
    std::this_thread::sleep_for(100ms);
    // At once: the oldest silent one gives its seat to the health check.
    for (int i = 0; i < 3; ++i) {
        auto h = http_get(s.gateway.port(), "/healthz");
        CHECK(h.status == 200);
    }
    // And a silent one is closed within a second or two, whatever else comes.
    std::this_thread::sleep_for(2500ms);
    int closed = 0;
    for (auto& sock : silent) {
        sock->non_blocking(true);
        char c;
        boost::system::error_code ec;
        sock->read_some(gw_asio::buffer(&c, 1), ec);
        if (ec == gw_asio::error::eof || ec == gw_asio::error::connection_reset) ++closed;
    }
    CHECK(closed == 80);  // 16 gave their seats to newer ones, the others passed their 1 s
    for (int i = 0; i < 3; ++i) CHECK(http_get(s.gateway.port(), "/healthz").status == 200);
    // A connection on such a seat that asks anything else is answered 503 and closed.
    auto other = http_get(s.gateway.port(), "/v1/docs/db:public:1");
    CHECK(other.status == 503);
    CHECK(error_of(other.body) == "too_many_connections");
}

TEST_CASE("gateway: idle tokenless WebSockets cannot hold the slots, and /healthz answers when they are full") {
    Setup s({"--public", "db:public:*", "--max-connections", "5", "--idle-timeout", "2s"});
    s.publish("db:order:42", 1, 0x100);
    REQUIRE(eventually([&] { return health_field(s.gateway.port(), "connections") <= 1; }, 5s));
    std::vector<std::unique_ptr<WsClient>> idle;
    for (int i = 0; i < 5; ++i) idle.push_back(std::make_unique<WsClient>(s.gateway.port()));
    std::this_thread::sleep_for(200ms);
    // Full: /healthz still answers (a load balancer keeps the gateway), anything else is 503.
    auto h = http_get(s.gateway.port(), "/healthz");
    CHECK(h.status == 200);
    auto full = http_get(s.gateway.port(), "/v1/docs/db:public:1");
    CHECK(full.status == 503);
    CHECK(error_of(full.body) == "too_many_connections");
    CHECK(full.body.find("--max-connections") != std::string::npos);
    // Sockets that follow nothing are closed after --idle-timeout, with the reason.
    for (auto& ws : idle) {
        auto m = ws->next_with("idle_timeout", 5000ms);
        REQUIRE(m);
        CHECK(m->find("--idle-timeout") != std::string::npos);
        CHECK(ws->closed(3000ms));
    }
    CHECK(health_field(s.gateway.port(), "idle_disconnects") == 5);
    // Their places are free once the gateway has seen the closes.
    REQUIRE(eventually([&] { return health_field(s.gateway.port(), "connections") <= 1; }, 5s));
    CHECK(health_field(s.gateway.port(), "refused_connections") >= 1);
    WsClient holder(s.gateway.port(), "/v1/ws?token=" + mint_token(kSecret, {"db:order:42"}));
    holder.send(R"({"type":"subscribe","channel":"db:order:42"})");
    CHECK(holder.next_with("\"type\":\"doc\""));
    // One that follows a channel stays past the deadline.
    std::this_thread::sleep_for(3000ms);
    CHECK_FALSE(holder.closed(10ms));
}

TEST_CASE("gateway: a burst of connections never opens more streams than --max-connections") {
    Setup s({"--public", "db:public:*", "--max-connections", "20", "--threads", "2"});
    s.publish("db:public:1", 1, 0x100);
    std::vector<std::unique_ptr<RawClient>> crowd;
    const std::string request = "GET /v1/sse?channel=db:public:1 HTTP/1.1\r\nHost: x\r\n\r\n";
    for (int i = 0; i < 300; ++i) {
        try {
            crowd.push_back(std::make_unique<RawClient>(s.gateway.port()));
            crowd.back()->write(request);
        } catch (const std::exception&) {
            // refused and closed before the request went out
        }
    }
    int streams = 0, refused = 0;
    for (auto& c : crowd) {
        std::string got = c->read_for(2000ms, "\r\n\r\n");
        if (got.rfind("HTTP/1.1 200", 0) == 0) ++streams;
        else if (got.find("503") != std::string::npos) ++refused;
    }
    MESSAGE(streams << " streams opened and " << refused << " refused of a burst of " << crowd.size());
    CHECK(streams <= 20);
    CHECK(streams >= 1);
    CHECK(health_field(s.gateway.port(), "sse_streams") <= 20);
}

TEST_CASE("gateway: WebSocket after drops a doc already waiting at or below it") {
    Setup s({"--threads", "1"});
    constexpr std::size_t big = 8 * 1024 * 1024;
    s.publish("db:order:1", 1, 0x100, big);
    s.publish("db:order:2", 2, 0x128);
    auto token = mint_token(kSecret, {"db:order:*"});
    // Another client follows both, so this shard holds their docs and hands them over at once.
    WsClient holder(s.gateway.port(), "/v1/ws?token=" + token);
    holder.send(R"({"type":"subscribe","channel":"db:order:1"})");
    holder.send(R"({"type":"subscribe","channel":"db:order:2"})");
    REQUIRE(holder.next_with("db:order:2\",\"doc\"", 10000ms));
    for (int round = 0; round < 3; ++round) {
        WsClient ws(s.gateway.port(), "/v1/ws?token=" + token);
        // The 8 MB doc is on its way while db:order:2's doc waits; `after` then passes the waiting doc.
        ws.send(R"({"type":"subscribe","channel":"db:order:1"})");
        ws.send(R"({"type":"subscribe","channel":"db:order:2"})");
        ws.send(R"({"type":"subscribe","channel":"db:order:2","after":"1/0/1000"})");
        REQUIRE(ws.next_with("db:order:1\",\"doc\"", 10000ms));
        CHECK_FALSE(ws.next_with("db:order:2\",\"doc\"", 1000ms));
    }
}

TEST_CASE("gateway: HEAD /v1/sse and HEAD /healthz send a header and no body") {
    Setup s({"--public", "db:public:*"});
    s.publish("db:public:1", 1, 0x100);
    {
        RawClient c(s.gateway.port());
        c.write("HEAD /v1/sse?channel=db:public:1 HTTP/1.1\r\nHost: x\r\n\r\n");
        std::string got = c.read_for(1500ms);
        REQUIRE(got.rfind("HTTP/1.1 200", 0) == 0);
        CHECK(got.find("text/event-stream") != std::string::npos);
        auto blank = got.find("\r\n\r\n");
        REQUIRE(blank != std::string::npos);
        CHECK(got.substr(blank + 4).empty());
    }
    {
        RawClient c(s.gateway.port());
        c.write("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nHEAD /v1/sse?channel=nonsense HTTP/1.1\r\nHost: x\r\n\r\n");
        std::string got = c.read_for(1500ms);
        auto blank = got.find("\r\n\r\n");
        REQUIRE(blank != std::string::npos);
        // The second answer (400) follows the first's header at once: neither has a body.
        std::string rest = got.substr(blank + 4);
        CHECK(rest.rfind("HTTP/1.1 400", 0) == 0);
        CHECK(rest.find('{') == std::string::npos);
    }
}

TEST_CASE("gateway: an envelope holding line breaks is one SSE event, whole") {
    Setup s;
    auto token = mint_token(kSecret, {"db:order:42"});
    SseClient sse(s.gateway.port(), "/v1/sse?channel=db:order:42&token=" + token);
    REQUIRE(sse.status() == 200);
    std::this_thread::sleep_for(300ms);
    auto redis = s.redis.client();
    auto send = [&](int n, std::uint64_t lsn) {
        // The envelope's fixed head and tail around a doc that keeps its line breaks (a json
        // column keeps the text it was given).
        std::string envelope = "{\"channel\":\"db:order:42\",\"doc\":{\n  \"n\": " + std::to_string(n) +
                               ",\r\n\n  \"x\": \"a\"\r},\"generation\":1,\"lsn\":\"0/" + std::to_string(lsn) + "\"}";
        redis->command({"SET", "db:order:42", envelope});
        redis->command({"PUBLISH", "db:order:42", envelope});
    };
    send(1, 100);
    send(2, 200);
    auto a = sse.next_doc();
    REQUIRE(a);
    CHECK(n_of(a->data) >= 1);
    auto last = n_of(a->data);
    if (last == 1) {
        auto b = sse.next_doc();
        REQUIRE(b);
        CHECK(n_of(b->data) == 2);
        CHECK(b->id == "1/0/200");
    }
}

TEST_CASE("gateway: Redis publishing faster than the hub parses keeps memory bounded and /healthz quick") {
    const char* asan = std::getenv("ASAN_OPTIONS");
    Setup s({}, {}, {"ASAN_OPTIONS=" + std::string(asan ? asan : "") + ":quarantine_size_mb=1:thread_local_quarantine_size_kb=64"});
    auto token = mint_token(kSecret, {"db:order:42"});
    s.publish("db:order:42", 0, 0x10);
    SseClient sse(s.gateway.port(), "/v1/sse?channel=db:order:42&token=" + token);
    REQUIRE(sse.next_doc());
    std::this_thread::sleep_for(300ms);
    std::size_t before = s.gateway.rss_bytes();
    std::size_t peak = before;
    double slowest_health = 0;
    std::atomic<bool> done{false};
    std::thread watcher([&] {
        while (!done) {
            peak = std::max(peak, s.gateway.rss_bytes());
            auto started = std::chrono::steady_clock::now();
            try {
                http_get(s.gateway.port(), "/healthz");
            } catch (const std::exception&) {
            }
            slowest_health = std::max(slowest_health,
                                      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
            std::this_thread::sleep_for(100ms);
        }
    });
    // 3 000 versions of 100 kB, PUBLISHed flat out in pipelined batches (300 MB). The newest is
    // retained first, as the worker's sink leaves it: a subscriber that Redis drops for reading
    // too slowly reads it when it subscribes again.
    auto publisher = s.redis.client();
    auto* ctx = publisher->context();
    const std::string pad(100 * 1024, 'x');
    const int last = 3000;
    publisher->command({"SET", "db:order:42", "{\"channel\":\"db:order:42\",\"doc\":{\"n\":" + std::to_string(last) +
                                                 ",\"pad\":\"\"},\"generation\":1,\"lsn\":\"" +
                                                 format_lsn(0x100 + static_cast<std::uint64_t>(last)) + "\"}"});
    int sent = 0;
    for (int batch = 0; batch < last / 50; ++batch) {
        for (int i = 0; i < 50; ++i) {
            int n = ++sent;
            std::string envelope = "{\"channel\":\"db:order:42\",\"doc\":{\"n\":" + std::to_string(n) + ",\"pad\":\"" +
                                   pad + "\"},\"generation\":1,\"lsn\":\"" + format_lsn(0x100 + static_cast<std::uint64_t>(n)) + "\"}";
            redisAppendCommand(ctx, "PUBLISH %s %b", "db:order:42", envelope.data(), envelope.size());
        }
        for (int i = 0; i < 50; ++i) {
            void* raw = nullptr;
            REQUIRE(redisGetReply(ctx, &raw) == REDIS_OK);
            freeReplyObject(raw);
        }
    }
    std::this_thread::sleep_for(2000ms);
    done = true;
    watcher.join();
    MESSAGE("gateway RSS before " << before / 1024 << " kB, peak " << peak / 1024 << " kB; slowest /healthz "
                                  << slowest_health << " s");
    // One pending doc per channel: what waits never grows with what Redis sends (a queue of every
    // message grows by tens of MB here).
    CHECK(peak < before + 32 * 1024 * 1024);
    CHECK(slowest_health < 3.0);
    // The stream still ends on the newest.
    int seen = -1;
    while (auto e = sse.next_doc(3000ms)) seen = n_of(e->data);
    CHECK(seen == last);
}

TEST_CASE("gateway: followed channels Redis holds no doc for are subscribed on Redis only within --warm-rate") {
    Setup s({"--public", "db:order:*", "--warm-rate", "5", "--max-channels", "200"});
    s.publish("db:order:held", 1, 0x100);
    auto started = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<WsClient>> clients;
    for (int c = 0; c < 10; ++c) {
        clients.push_back(std::make_unique<WsClient>(s.gateway.port()));
        for (int i = 0; i < 100; ++i)
            clients.back()->send(R"({"type":"subscribe","channel":"db:order:)" + std::to_string(c * 100 + i) + "\"}");
    }
    clients.front()->send(R"({"type":"subscribe","channel":"db:order:held"})");
    CHECK(clients.front()->next_with("db:order:held\",\"doc\"", 5000ms));
    std::this_thread::sleep_for(2000ms);
    auto subscribed = s.redis.client()->command({"PUBSUB", "CHANNELS", "db:order:*"});
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    REQUIRE(subscribed->type == REDIS_REPLY_ARRAY);
    MESSAGE(subscribed->elements << " channels subscribed on Redis for 1 000 missing docs and one held, in " << seconds
                                 << " s at --warm-rate 5");
    // Under the worker's --live subscribers each would be a doc computed and kept live.
    CHECK(subscribed->elements <= 1 + 5 + static_cast<std::size_t>(5 * (seconds + 1)));
}

TEST_CASE("gateway: followed channels Redis holds no doc for are subscribed only within --warm-rate and --max-missing-docs") {
    // With the worker's --live subscribers every channel the gateway subscribes is a doc it
    // computes and keeps live: subscriptions to missing docs go through the same budget as warm
    // requests.
    Setup s({"--public", "db:order:*", "--warm-rate", "5", "--max-missing-docs", "8", "--max-channels", "200"});
    s.publish("db:order:held", 1, 0x100);
    auto listener = s.redis.client();
    auto* ctx = listener->context();
    REQUIRE(redisAppendCommand(ctx, "SUBSCRIBE docsync:warm") == REDIS_OK);
    int flushed = 0;
    while (!flushed) REQUIRE(redisBufferWrite(ctx, &flushed) == REDIS_OK);
    auto started = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<WsClient>> clients;
    for (int c = 0; c < 10; ++c) {
        clients.push_back(std::make_unique<WsClient>(s.gateway.port()));
        for (int i = 0; i < 100; ++i)
            clients.back()->send(R"({"type":"subscribe","channel":"db:order:)" + std::to_string(c * 100 + i) + "\"}");
    }
    clients.front()->send(R"({"type":"subscribe","channel":"db:order:held"})");
    // A doc Redis holds is followed at once, whatever the budget.
    CHECK(clients.front()->next_with("db:order:held\",\"doc\"", 5000ms));
    // The others are told they wait.
    auto notice = clients.back()->next_with("\"deferred\"", 5000ms);
    REQUIRE(notice);
    CHECK(notice->find("--warm-rate") != std::string::npos);
    CHECK(notice->find("--max-missing-docs") != std::string::npos);
    // Once the gateway has taken every subscribe (one after the other: seconds on a loaded machine),
    // 3 s more for the budget to be overspent, if it were.
    for (auto until = std::chrono::steady_clock::now() + 30s;
         health_field(s.gateway.port(), "deferred_channels") < 900 && std::chrono::steady_clock::now() < until;)
        std::this_thread::sleep_for(100ms);
    std::this_thread::sleep_for(3000ms);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    auto subscribed = s.redis.client()->command({"PUBSUB", "CHANNELS", "db:order:*"});
    REQUIRE(subscribed->type == REDIS_REPLY_ARRAY);
    int warms = 0;
    for (;;) {
        pollfd pfd{ctx->fd, POLLIN, 0};
        if (::poll(&pfd, 1, 200) <= 0) break;
        REQUIRE(redisBufferRead(ctx) == REDIS_OK);
        void* raw = nullptr;
        while (redisGetReplyFromReader(ctx, &raw) == REDIS_OK && raw) {
            publish::Reply reply(static_cast<redisReply*>(raw));
            if (reply->elements == 3 && publish::reply_text(reply->element[0]) == "message") ++warms;
            raw = nullptr;
        }
    }
    MESSAGE(subscribed->elements << " channels subscribed on Redis and " << warms << " warm requests for 1 000 missing docs in "
                                 << seconds << " s");
    // The held doc's channel and at most --max-missing-docs missing ones.
    CHECK(subscribed->elements <= 1 + 8);
    CHECK(warms <= 8);
    CHECK(warms >= 1);
    CHECK(health_field(s.gateway.port(), "missing_docs") == 8);
    CHECK(health_field(s.gateway.port(), "deferred_channels") >= 900);
    // A missing doc that appears is followed once it is looked at again.
    s.publish("db:order:999", 7, 0x700);
    auto late = clients.back()->next_with("db:order:999\",\"doc\"", 20000ms);
    REQUIRE(late);
    CHECK(n_of(*late) == 7);
}
