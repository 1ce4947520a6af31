// docsync-gateway against a real Redis: docs published by the real Redis sink, read through the
// gateway's HTTP, SSE and WebSocket ends by real clients.
#include <doctest/doctest.h>

#include "engine/key_text.hpp"
#include "gateway_setup.hpp"

TEST_CASE("gateway: GET /v1/docs serves the retained doc with its version as ETag, and 304 for it") {
    Setup s({"--public", "db:public:*"});
    s.publish("db:order:42", 1, 0x100);
    auto token = mint_token(kSecret, {"db:order:42"});
    auto a = http_get(s.gateway.port(), "/v1/docs/db:order:42", {{"Authorization", bearer(token)}});
    CHECK(a.status == 200);
    CHECK(a.headers["etag"] == "\"1/0/100\"");
    CHECK(n_of(a.body) == 1);
    auto b = http_get(s.gateway.port(), "/v1/docs/db:order:42?token=" + token, {{"If-None-Match", "\"1/0/100\""}});
    CHECK(b.status == 304);
    CHECK(b.body.empty());
    s.publish("db:order:42", 2, 0x200);
    auto c = http_get(s.gateway.port(), "/v1/docs/db:order:42?token=" + token, {{"If-None-Match", "\"1/0/100\""}});
    CHECK(c.status == 200);
    CHECK(n_of(c.body) == 2);
    // A doc Redis does not hold: 404, and the worker is asked for it on docsync:warm.
    auto warm = s.redis.client();
    auto d = http_get(s.gateway.port(), "/v1/docs/db:public:7");
    CHECK(d.status == 404);
    CHECK(error_of(d.body) == "not_found");
}

TEST_CASE("gateway: every way a token is refused, and what it opens") {
    Setup s({"--public", "db:public:*"});
    s.publish("db:order:42", 1, 0x100);
    s.publish("db:customer_orders:7:3", 1, 0x100);
    s.publish("db:public:1", 1, 0x100);
    int port = s.gateway.port();
    auto get = [&](const std::string& target, const std::string& token = {}) {
        std::map<std::string, std::string> h;
        if (!token.empty()) h["Authorization"] = bearer(token);
        return http_get(port, target, h);
    };
    SUBCASE("no token: only public channels") {
        CHECK(get("/v1/docs/db:public:1").status == 200);
        auto a = get("/v1/docs/db:order:42");
        CHECK(a.status == 401);
        CHECK(error_of(a.body) == "missing_token");
        CHECK(a.headers.count("www-authenticate"));
    }
    SUBCASE("forged: signed with another key") {
        auto a = get("/v1/docs/db:order:42", mint_token("another-secret-another-secret-0123456789", {"db:order:42"}));
        CHECK(a.status == 401);
        CHECK(error_of(a.body) == "invalid_token");
    }
    SUBCASE("unsigned (alg none)") {
        auto a = get("/v1/docs/db:order:42", mint_token(kSecret, {"db:order:42"}, 300s, JWT_ALG_NONE));
        CHECK(a.status == 401);
        CHECK(error_of(a.body) == "invalid_token");
    }
    SUBCASE("another HMAC than HS256") {
        auto a = get("/v1/docs/db:order:42", mint_token(kSecret, {"db:order:42"}, 300s, JWT_ALG_HS512));
        CHECK(a.status == 401);
        CHECK(error_of(a.body) == "invalid_token");
    }
    SUBCASE("tampered payload") {
        auto token = mint_token(kSecret, {"db:order:42"});
        auto other = mint_token(kSecret, {"db:*"});
        // The header and signature of one, the payload of another.
        auto dot1 = token.find('.'), dot2 = token.rfind('.');
        auto odot1 = other.find('.'), odot2 = other.rfind('.');
        std::string spliced = token.substr(0, dot1) + other.substr(odot1, odot2 - odot1) + token.substr(dot2);
        auto a = get("/v1/docs/db:customer_orders:7:3", spliced);
        CHECK(a.status == 401);
    }
    SUBCASE("expired") {
        auto a = get("/v1/docs/db:order:42", mint_token(kSecret, {"db:order:42"}, -10s));
        CHECK(a.status == 401);
        CHECK(error_of(a.body) == "token_expired");
    }
    SUBCASE("without exp") {
        auto a = get("/v1/docs/db:order:42", mint_token(kSecret, {"db:order:42"}, 300s, JWT_ALG_HS256, false));
        CHECK(a.status == 401);
        CHECK(error_of(a.body) == "invalid_token");
    }
    SUBCASE("garbage") {
        CHECK(get("/v1/docs/db:order:42", "not-a-token").status == 401);
        CHECK(get("/v1/docs/db:order:42", std::string(9000, 'a')).status == 401);
    }
    SUBCASE("a channel outside the claim: 403, a public one still opens") {
        auto token = mint_token(kSecret, {"db:order:41"});
        auto a = get("/v1/docs/db:order:42", token);
        CHECK(a.status == 403);
        CHECK(error_of(a.body) == "forbidden");
        CHECK(get("/v1/docs/db:public:1", token).status == 200);
    }
    SUBCASE("prefix patterns") {
        auto token = mint_token(kSecret, {"db:customer_orders:7:*"});
        CHECK(get("/v1/docs/db:customer_orders:7:3", token).status == 200);
        CHECK(get("/v1/docs/db:customer_orders:70:3", token).status == 403);
        CHECK(get("/v1/docs/db:order:42", token).status == 403);
        // A pattern with * inside is refused as a whole token.
        CHECK(get("/v1/docs/db:order:42", mint_token(kSecret, {"db:*:42"})).status == 401);
    }
    SUBCASE("SSE and WebSocket refuse the same way") {
        SseClient refused(port, "/v1/sse?channel=db:order:42");
        CHECK(refused.status() == 401);
        CHECK(error_of(refused.error_body()) == "missing_token");
        SseClient forbidden(port, "/v1/sse?channel=db:public:1&channel=db:order:42&token=" +
                                      mint_token(kSecret, {"db:order:41"}));
        CHECK(forbidden.status() == 403);
        {
            // A refused token at the upgrade: the reason over the socket, then the close.
            WsClient refused_ws(port, "/v1/ws?token=" + mint_token("another-secret-another-secret-0123456789", {"db:*"}));
            auto m = refused_ws.next();
            REQUIRE(m);
            CHECK(m->find("\"type\":\"error\"") != std::string::npos);
            CHECK(error_of(*m) == "invalid_token");
            CHECK(refused_ws.closed(3000ms));
            CHECK(refused_ws.close_reason() == "invalid_token");
        }
        WsClient ws(port, "/v1/ws?token=" + mint_token(kSecret, {"db:order:41"}));
        ws.send(R"({"type":"subscribe","channel":"db:order:42"})");
        auto m = ws.next();
        REQUIRE(m);
        CHECK(m->find("\"type\":\"error\"") != std::string::npos);
        CHECK(error_of(*m) == "forbidden");
        ws.send(R"({"type":"subscribe","channel":"db:public:1"})");
        CHECK(ws.next_with("\"type\":\"doc\""));
        ws.send(R"({"type":"subscribe","channel":"nonsense"})");
        CHECK(error_of(ws.next().value_or("")) == "bad_request");
        ws.send(R"([[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[)");
        CHECK(error_of(ws.next().value_or("")) == "bad_request");
    }
}

TEST_CASE("gateway: a token that expires mid-stream closes the stream") {
    Setup s;
    s.publish("db:order:42", 1, 0x100);
    auto token = mint_token(kSecret, {"db:order:42"}, 2s);
    SseClient sse(s.gateway.port(), "/v1/sse?channel=db:order:42&token=" + token);
    REQUIRE(sse.status() == 200);
    REQUIRE(sse.next_doc());
    WsClient ws(s.gateway.port(), "/v1/ws", {{"Authorization", bearer(token)}});
    ws.send(R"({"type":"subscribe","channel":"db:order:42"})");
    REQUIRE(ws.next_with("\"type\":\"doc\""));
    auto e = sse.next(5000ms);
    REQUIRE(e);
    CHECK(e->event == "stream-error");
    CHECK(error_of(e->data) == "token_expired");
    CHECK(sse.ended(3000ms));
    auto m = ws.next_with("token_expired", 5000ms);
    CHECK(m);
    CHECK(ws.closed(3000ms));
}

TEST_CASE("gateway: a WebSocket client refreshes its token before it expires and keeps its subscription") {
    Setup s;
    s.publish("db:order:42", 1, 0x100);
    WsClient ws(s.gateway.port(), "/v1/ws?token=" + mint_token(kSecret, {"db:order:42"}, 2s));
    ws.send(R"({"type":"subscribe","channel":"db:order:42"})");
    REQUIRE(ws.next_with("\"type\":\"doc\""));
    ws.send(R"({"type":"auth","token":")" + mint_token(kSecret, {"db:order:*"}, 60s) + "\"}");
    REQUIRE(ws.next_with("authorized"));
    std::this_thread::sleep_for(3000ms);
    s.publish("db:order:42", 2, 0x200);
    auto m = ws.next_with("\"type\":\"doc\"");
    REQUIRE(m);
    CHECK(n_of(*m) == 2);
    // A forged refresh leaves the old token in place.
    ws.send(R"({"type":"auth","token":"x.y.z"})");
    CHECK(error_of(ws.next().value_or("")) == "invalid_token");
}

TEST_CASE("gateway: SSE sends the retained doc, then every newer one, Last-Event-ID resumes") {
    Setup s;
    s.publish("db:order:42", 1, 0x100);
    s.publish("db:order:43", 1, 0x100);
    auto token = mint_token(kSecret, {"db:order:*"});
    std::string target = "/v1/sse?channel=db:order:42&channel=db:order:43&token=" + token;
    std::string cursor;
    {
        SseClient sse(s.gateway.port(), target);
        REQUIRE(sse.status() == 200);
        CHECK(sse.content_type() == "text/event-stream");
        auto a = sse.next_doc();
        auto b = sse.next_doc();
        REQUIRE(a);
        REQUIRE(b);
        CHECK(b->id == "1/0/100,1/0/100");
        s.publish("db:order:42", 2, 0x200);
        auto c = sse.next_doc();
        REQUIRE(c);
        CHECK(n_of(c->data) == 2);
        CHECK(c->id == "1/0/200,1/0/100");
        cursor = c->id;
    }
    // Published while the client was away: only that comes back, nothing it had.
    s.publish("db:order:43", 3, 0x300);
    SseClient again(s.gateway.port(), target, {{"Last-Event-ID", cursor}});
    auto d = again.next_doc();
    REQUIRE(d);
    CHECK(d->data.find("db:order:43") != std::string::npos);
    CHECK(n_of(d->data) == 3);
    CHECK(d->id == "1/0/200,1/0/300");
    CHECK_FALSE(again.next_doc(800ms));
    // The same through the query parameter (a client that opens a new EventSource).
    SseClient param(s.gateway.port(), target + "&last-event-id=1/0/200,1/0/300");
    CHECK_FALSE(param.next_doc(800ms));
    // A cursor of another stream's shape is ignored: every retained doc comes.
    SseClient other(s.gateway.port(), target + "&last-event-id=1/0/200");
    CHECK(other.next_doc());
    CHECK(other.next_doc());
}

TEST_CASE("gateway: WebSocket subscribe, after, unsubscribe, versions only move forward") {
    Setup s;
    s.publish("db:order:42", 5, 0x500);
    WsClient ws(s.gateway.port(), "/v1/ws?token=" + mint_token(kSecret, {"db:order:*"}));
    ws.send(R"({"type":"subscribe","channel":"db:order:42","after":"1/0/500"})");
    CHECK(ws.next_with("subscribed"));
    CHECK_FALSE(ws.next_with("\"type\":\"doc\"", 700ms));  // it has 1/0/500 already
    // An older version published by a late writer never reaches the client (the sink refuses it,
    // and the gateway would too).
    s.sink.publish("db:order:42", doc_of(4), DocVersion{1, 0x400});
    s.publish("db:order:42", 6, 0x600);
    auto m = ws.next_with("\"type\":\"doc\"");
    REQUIRE(m);
    CHECK(n_of(*m) == 6);
    CHECK(m->find("\"version\":\"1/0/600\"") != std::string::npos);
    ws.send(R"({"type":"unsubscribe","channel":"db:order:42"})");
    CHECK(ws.next_with("unsubscribed"));
    s.publish("db:order:42", 7, 0x700);
    CHECK_FALSE(ws.next_with("\"type\":\"doc\"", 700ms));
}

TEST_CASE("gateway: a client that reads nothing while 1000 versions are published stays bounded, then gets the newest") {
    // Under AddressSanitizer freed memory waits in a quarantine (256 MB) before reuse: kept small
    // here, so that what the gateway holds shows in its resident size.
    const char* asan = std::getenv("ASAN_OPTIONS");
    Setup s({"--slow-client-timeout", "60s"}, {},
            {"ASAN_OPTIONS=" + std::string(asan ? asan : "") + ":quarantine_size_mb=1:thread_local_quarantine_size_kb=64"});
    constexpr std::size_t pad = 128 * 1024;  // 128 MB published in all: far beyond any socket buffer
    s.publish("db:order:42", 0, 0x1000, pad);
    auto token = mint_token(kSecret, {"db:order:42"});
    SseClient slow(s.gateway.port(), "/v1/sse?channel=db:order:42&token=" + token, {}, 16 * 1024);
    REQUIRE(slow.status() == 200);
    std::this_thread::sleep_for(300ms);
    std::size_t before = s.gateway.rss_bytes();
    for (int n = 1; n <= 1000; ++n) s.publish("db:order:42", n, 0x1000 + static_cast<std::uint64_t>(n), pad);
    std::this_thread::sleep_for(500ms);
    std::size_t after = s.gateway.rss_bytes();
    MESSAGE("gateway RSS before " << before / 1024 << " kB, after 1000 versions of 128 kB unread: " << after / 1024 << " kB");
    // A queue of every version would hold 128 MB; the newest pending version, one doc (the rest is
    // the allocators' caches, larger under AddressSanitizer).
    CHECK(after < before + 40 * 1024 * 1024);
    // Reading now: versions arrive in order, skipping, and the last is the newest.
    int last = -1, received = 0;
    while (auto e = slow.next_doc(2000ms)) {
        int n = n_of(e->data);
        CHECK(n > last);
        last = n;
        ++received;
        if (n == 1000) break;
    }
    CHECK(last == 1000);
    MESSAGE("the slow client received " << received << " of 1001 versions, ending on the newest");
    CHECK(received < 1001);
}

TEST_CASE("gateway: a client too slow for too long is disconnected") {
    Setup s({"--slow-client-timeout", "2s"});
    constexpr std::size_t pad = 256 * 1024;
    auto token = mint_token(kSecret, {"db:order:42"});
    SseClient slow(s.gateway.port(), "/v1/sse?channel=db:order:42&token=" + token, {}, 4096);
    REQUIRE(slow.status() == 200);
    // Versions keep coming until the socket's buffers are full and a write waits 2 s.
    auto started = std::chrono::steady_clock::now();
    bool dropped = false;
    for (int n = 1; !dropped && std::chrono::steady_clock::now() - started < 20s; ++n) {
        s.publish("db:order:42", n, static_cast<std::uint64_t>(n) * 16, pad);
        std::this_thread::sleep_for(20ms);
        if (n % 10 == 0)
            dropped = http_get(s.gateway.port(), "/healthz").body.find("\"slow_disconnects\":1") != std::string::npos;
    }
    CHECK(dropped);
    CHECK(std::chrono::steady_clock::now() - started >= 2s);
    CHECK(s.gateway.log().find("too slow") != std::string::npos);
    // What the buffers held comes, then the end of the stream.
    CHECK(slow.ended(10000ms));
}

TEST_CASE("gateway: a Redis restart during streaming: the streams resume and nothing ends stale") {
    Setup s({}, {"--appendonly", "yes", "--appendfsync", "always"});
    s.publish("db:order:42", 1, 0x100);
    auto token = mint_token(kSecret, {"db:order:42"});
    SseClient sse(s.gateway.port(), "/v1/sse?channel=db:order:42&token=" + token);
    WsClient ws(s.gateway.port(), "/v1/ws?token=" + token);
    ws.send(R"({"type":"subscribe","channel":"db:order:42"})");
    REQUIRE(sse.next_doc());
    REQUIRE(ws.next_with("\"type\":\"doc\""));
    s.redis.stop();
    std::this_thread::sleep_for(500ms);
    CHECK(http_get(s.gateway.port(), "/healthz").status == 503);
    s.redis.start();
    // Published before the gateway subscribed again: pub/sub lost it, the read after the
    // resubscription finds it.
    publish::RedisSink after_restart(s.redis.address());
    after_restart.publish("db:order:42", doc_of(2), DocVersion{1, 0x200});
    auto e = sse.next_doc(15000ms);
    REQUIRE(e);
    CHECK(n_of(e->data) == 2);
    auto m = ws.next_with("\"type\":\"doc\"", 15000ms);
    REQUIRE(m);
    CHECK(n_of(*m) == 2);
    CHECK(http_get(s.gateway.port(), "/healthz").status == 200);
    after_restart.publish("db:order:42", doc_of(3), DocVersion{1, 0x300});
    auto f = sse.next_doc();
    REQUIRE(f);
    CHECK(n_of(f->data) == 3);
}

TEST_CASE("gateway: two gateways on one Redis, a client moving between them gets no duplicate") {
    Setup s;
    GatewayProcess second(s.redis.url(), kSecret);
    s.publish("db:order:42", 1, 0x100);
    auto token = mint_token(kSecret, {"db:order:42"});
    std::string target = "/v1/sse?channel=db:order:42&token=" + token;
    SseClient a(s.gateway.port(), target);
    SseClient b(second.port(), target);
    REQUIRE(a.next_doc());
    REQUIRE(b.next_doc());
    s.publish("db:order:42", 2, 0x200);
    auto ea = a.next_doc();
    auto eb = b.next_doc();
    REQUIRE(ea);
    REQUIRE(eb);
    CHECK(ea->id == eb->id);
    // Resuming on the other gateway from what the first one sent.
    SseClient moved(second.port(), target, {{"Last-Event-ID", ea->id}});
    CHECK_FALSE(moved.next_doc(700ms));
    s.publish("db:order:42", 3, 0x300);
    auto em = moved.next_doc();
    REQUIRE(em);
    CHECK(n_of(em->data) == 3);
    // Both subscribed on Redis: a worker's `--live subscribers` poll sees the channel.
    auto r = s.redis.client()->command({"PUBSUB", "NUMSUB", "db:order:42"});
    REQUIRE(r->elements == 2);
    CHECK(r->element[1]->integer == 2);
}

TEST_CASE("gateway: the first subscriber announces itself on docsync:touch, or docsync:warm when nothing is retained") {
    Setup s;
    s.publish("db:order:42", 1, 0x100);
    auto listener = s.redis.client();
    auto* ctx = listener->context();
    REQUIRE(redisAppendCommand(ctx, "SUBSCRIBE docsync:warm docsync:touch") == REDIS_OK);
    int done = 0;
    while (!done) REQUIRE(redisBufferWrite(ctx, &done) == REDIS_OK);
    auto next_message = [&]() -> std::pair<std::string, std::string> {
        for (;;) {
            void* raw = nullptr;
            if (redisGetReply(ctx, &raw) != REDIS_OK || !raw) return {};
            publish::Reply reply(static_cast<redisReply*>(raw));
            if (reply->elements == 3 && publish::reply_text(reply->element[0]) == "message")
                return {publish::reply_text(reply->element[1]), publish::reply_text(reply->element[2])};
        }
    };
    auto token = mint_token(kSecret, {"db:order:*"});
    SseClient held(s.gateway.port(), "/v1/sse?channel=db:order:42&token=" + token);
    CHECK(next_message() == std::make_pair(std::string("docsync:touch"), std::string("db:order:42")));
    SseClient missing(s.gateway.port(), "/v1/sse?channel=db:order:99&token=" + token);
    CHECK(next_message() == std::make_pair(std::string("docsync:warm"), std::string("db:order:99")));
}

TEST_CASE("gateway: settings errors exit 2, SIGTERM exits 0") {
    RedisServer redis;
    {
        GatewayProcess g(redis.url(), kSecret);
        CHECK(g.stop() == 0);
    }
    auto run = [](std::vector<std::string> args) {
        std::string command = std::string(DOCSYNC_GATEWAY_PATH);
        for (auto& a : args) command += " '" + a + "'";
        command += " >/dev/null 2>&1";
        int status = std::system(command.c_str());
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    };
    CHECK(run({"--help"}) == 0);
    CHECK(run({"--listen", "nowhere"}) == 2);
    CHECK(run({"--public", "db:*:x"}) == 2);
    CHECK(run({"--jwt-secret-file", "/nonexistent/secret"}) == 2);
    CHECK(run({"--redis", "http://x"}) == 2);
}

TEST_CASE("gateway on a Redis Cluster: SSUBSCRIBE on the slot's master, following moved slots and a failover") {
    RedisTestCluster cluster(2, 1);  // node 2 replicates node 0
    publish::RedisClusterSink sink(cluster.address());
    GatewayProcess gateway(cluster.url(), kSecret);
    const std::string channel = "db:order:42";
    const std::string key = publish::cluster_key(channel);
    const int slot = publish::key_slot(key);
    std::uint64_t lsn = 0x100;
    int n = 0;
    // Publishes the next version, retrying while a master fails over.
    auto publish_next = [&] {
        ++n;
        lsn += 0x100;
        auto deadline = std::chrono::steady_clock::now() + 20s;
        for (;;) {
            try {
                sink.publish(channel, doc_of(n), DocVersion{1, lsn});
                return;
            } catch (const Error&) {
                if (std::chrono::steady_clock::now() > deadline) throw;
                std::this_thread::sleep_for(100ms);
            }
        }
    };
    publish_next();
    auto token = mint_token(kSecret, {"db:order:*"});
    SseClient sse(gateway.port(), "/v1/sse?channel=" + channel + "&token=" + token);
    auto first = sse.next_doc();
    REQUIRE(first);
    CHECK(n_of(first->data) == 1);
    auto shard_subscribers = [&](int node) {
        auto r = cluster.node(node).client()->command({"PUBSUB", "SHARDNUMSUB", key});
        return r->elements == 2 ? r->element[1]->integer : -1;
    };
    // The channel is read before it is subscribed: the doc may come just before the subscription.
    CHECK(eventually([&] { return shard_subscribers(cluster.owner_of(slot)) == 1; }, 10s));
    // Resharding: the slot moves (twice when it starts on node 0, so that it ends there).
    std::vector<int> path = cluster.owner_of(slot) == 0 ? std::vector<int>{1, 0} : std::vector<int>{0};
    for (int to : path) {
        cluster.move_slot(slot, cluster.owner_of(slot), to);
        publish_next();
        auto e = sse.next_doc(15000ms);
        REQUIRE_MESSAGE(e, "no doc after the slot moved to node " << to);
        CHECK(n_of(e->data) == n);
        CHECK(eventually([&] { return shard_subscribers(to) == 1; }, 10s));
    }
    // A failover: the replica (node 2) takes node 0's slots.
    cluster.command(2, {"CLUSTER", "FAILOVER"});
    REQUIRE(eventually([&] { return cluster.owner_of(slot) == 2; }, 20s));
    publish_next();
    auto e = sse.next_doc(20000ms);
    REQUIRE_MESSAGE(e, "no doc after the failover");
    CHECK(n_of(e->data) == n);
    CHECK(eventually([&] { return shard_subscribers(2) == 1; }, 10s));
    // Docs and WebSocket subscriptions work on the new master too.
    CHECK(n_of(http_get(gateway.port(), "/v1/docs/" + channel + "?token=" + token).body) == n);
    // /healthz's PING goes to a node of the cluster.
    CHECK(eventually([&] { return http_get(gateway.port(), "/healthz").status == 200; }, 10s));
}

TEST_CASE("gateway: a channel left and followed again at once still gets its retained doc") {
    Setup s;
    s.publish("db:order:42", 1, 0x100);
    WsClient ws(s.gateway.port(), "/v1/ws?token=" + mint_token(kSecret, {"db:order:*"}));
    ws.send(R"({"type":"subscribe","channel":"db:order:42"})");
    REQUIRE(ws.next_with("\"type\":\"doc\""));
    for (int round = 0; round < 20; ++round) {
        // The gateway drops the channel (its only follower left) and takes it up again before the
        // subscriber thread has seen either: the subscription never changed, the doc must still come.
        ws.send(R"({"type":"unsubscribe","channel":"db:order:42"})");
        ws.send(R"({"type":"subscribe","channel":"db:order:42"})");
        auto m = ws.next_with("\"type\":\"doc\"", 3000ms);
        REQUIRE_MESSAGE(m, "round " << round << ": no doc after subscribing again");
        CHECK(n_of(*m) == 1);
    }
}

TEST_CASE("gateway: idle with no channel followed it stays connected to Redis (a plain PONG counts)") {
    Setup s;
    // Pings go every 5 s; two unanswered ones would drop the connection and fail /healthz.
    for (int i = 0; i < 26; ++i) {
        CHECK(http_get(s.gateway.port(), "/healthz").status == 200);
        std::this_thread::sleep_for(500ms);
    }
    CHECK(s.gateway.log().find("did not answer PING") == std::string::npos);
    CHECK(s.gateway.log().find("unreachable") == std::string::npos);
}

TEST_CASE("gateway: clients asking for docs Redis does not hold cannot make the worker compute at their pace") {
    Setup s({"--public", "db:order:*", "--warm-rate", "20"});
    auto listener = s.redis.client();
    auto* ctx = listener->context();
    REQUIRE(redisAppendCommand(ctx, "SUBSCRIBE docsync:warm") == REDIS_OK);
    int done = 0;
    while (!done) REQUIRE(redisBufferWrite(ctx, &done) == REDIS_OK);
    // Ten asks for one missing doc: one warm. Then 200 distinct missing docs at once.
    for (int i = 0; i < 10; ++i) CHECK(http_get(s.gateway.port(), "/v1/docs/db:order:1").status == 404);
    auto started = std::chrono::steady_clock::now();
    for (int i = 2; i < 202; ++i) http_get(s.gateway.port(), "/v1/docs/db:order:" + std::to_string(i));
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::this_thread::sleep_for(300ms);
    std::map<std::string, int> warmed;
    for (;;) {
        pollfd pfd{ctx->fd, POLLIN, 0};
        if (::poll(&pfd, 1, 200) <= 0) break;
        REQUIRE(redisBufferRead(ctx) == REDIS_OK);
        void* raw = nullptr;
        while (redisGetReplyFromReader(ctx, &raw) == REDIS_OK && raw) {
            publish::Reply reply(static_cast<redisReply*>(raw));
            if (reply->elements == 3 && publish::reply_text(reply->element[0]) == "message")
                ++warmed[publish::reply_text(reply->element[2])];
            raw = nullptr;
        }
    }
    CHECK(warmed["db:order:1"] == 1);
    int total = 0;
    for (const auto& [channel, n] : warmed) total += n;
    MESSAGE(total << " warm requests for 201 missing docs asked in " << seconds << " s, at --warm-rate 20");
    CHECK(total <= 1 + 20 + static_cast<int>(20 * (seconds + 0.5)));
    CHECK(total >= 20);
    CHECK(s.gateway.log().find("--warm-rate") != std::string::npos);
}

TEST_CASE("gateway: a channel whose key is not spelled as PostgreSQL prints it is refused, naming the spelling") {
    Setup s({"--public", "db:order:*", "--public", "db:probe:*"});
    auto listener = s.redis.client();
    auto* ctx = listener->context();
    REQUIRE(redisAppendCommand(ctx, "SUBSCRIBE docsync:warm docsync:touch") == REDIS_OK);
    int done = 0;
    while (!done) REQUIRE(redisBufferWrite(ctx, &done) == REDIS_OK);
    // what the worker writes at every definitions load: the key types of its doc queries
    DocQuery order{"order", "SELECT doc FROM orders WHERE id = $1", {"id"}, "public"};
    order.key_types = {"int4"};
    DocQuery probe{"probe", "SELECT doc FROM probes WHERE id = $1", {"id"}, "public"};
    probe.key_types = {"int4"};
    s.sink.describe_keys(key_types_json({order, probe}));
    // the gateway reads the list again every few seconds: until then a probe channel goes through
    for (int i = 0; i < 100; ++i) {
        if (http_get(s.gateway.port(), "/v1/docs/db:probe:01").status == 400) break;
        std::this_thread::sleep_for(100ms);
    }
    auto refused = http_get(s.gateway.port(), "/v1/docs/db:order:01");
    CHECK(refused.status == 400);
    CHECK_MESSAGE(refused.body.find("spelled \\\"1\\\"") != std::string::npos, refused.body);
    auto plus = http_get(s.gateway.port(), "/v1/sse?channel=db:order:%2B1");
    CHECK(plus.status == 400);
    auto abc = http_get(s.gateway.port(), "/v1/docs/db:order:abc");
    CHECK(abc.status == 400);
    CHECK_MESSAGE(abc.body.find("not a valid int4") != std::string::npos, abc.body);
    // nothing was announced to the worker or subscribed for them: the first announcement is db:order:1's
    auto ok = http_get(s.gateway.port(), "/v1/docs/db:order:1");
    CHECK(ok.status == 404);
    for (;;) {
        void* raw = nullptr;
        REQUIRE(redisGetReply(ctx, &raw) == REDIS_OK);
        REQUIRE(raw);
        publish::Reply reply(static_cast<redisReply*>(raw));
        if (reply->elements == 3 && publish::reply_text(reply->element[0]) == "message" &&
            publish::reply_text(reply->element[2]).rfind("db:probe:", 0) != 0) {
            CHECK(publish::reply_text(reply->element[2]) == "db:order:1");
            break;
        }
    }
    auto admin = s.redis.client();
    publish::Reply keys = admin->command({"KEYS", "db:order:*"});
    CHECK(keys->elements == 0);
}
