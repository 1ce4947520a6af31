// Patches through docsync-gateway (docs/patches.md), against a real Redis: the key set to the whole
// doc's envelope and the patch envelope published, as the worker's script does. Clients that ask
// (patches=1) get a patch when they hold its base and the whole doc otherwise; the others, and
// GET /v1/docs, get whole docs; a patch the gateway cannot use never reaches a client as a patch.
#include <rapidjson/document.h>

#include "gateway/patch_forms.hpp"
#include "gateway_setup.hpp"
#include "patch/json_patch.hpp"
#include "envelope/envelope.hpp"

namespace {

const std::string kChannel = "db:board:7";

// A leaderboard with some bulk (a patch is worth sending only for a doc longer than it).
std::string board(int bob, std::size_t pad = 2000) {
    return R"({"game":7,"scores":[{"player":"ann","score":1.50},{"player":"bob","score":)" + std::to_string(bob) +
           R"(}],"note":"caf\u00e9 )" + std::string(pad, 'x') + "\"}";
}

std::string set_bob(int score) { return R"([{"op":"replace","path":"/scores/1/score","value":)" + std::to_string(score) + "}]"; }

std::string version_text(std::uint64_t lsn) { return "3/" + format_lsn(lsn); }

// Writes a channel's versions as the worker's Redis script does.
struct Writer {
    std::unique_ptr<publish::RedisConnection> redis;
    explicit Writer(const RedisServer& server) : redis(server.client()) {}

    static std::string whole(const std::string& doc, std::uint64_t lsn) {
        return R"({"channel":")" + kChannel + R"(","doc":)" + doc + R"(,"generation":3,"lsn":")" + format_lsn(lsn) + "\"}";
    }
    static std::string patch(const std::string& ops, std::uint64_t base, std::uint64_t lsn, const char* key = "patch") {
        return R"({"channel":")" + kChannel + "\",\"" + key + "\":" + ops + R"(,"base_generation":3,"base_lsn":")" +
               format_lsn(base) + R"(","generation":3,"lsn":")" + format_lsn(lsn) + "\"}";
    }
    // The key holds `doc` at `lsn`; the message is the whole envelope.
    void publish_whole(const std::string& doc, std::uint64_t lsn) {
        redis->command({"SET", kChannel, whole(doc, lsn)});
        redis->command({"PUBLISH", kChannel, whole(doc, lsn)});
    }
    // The key holds `doc` at `lsn`; the message is `message` (a patch envelope, or anything).
    void publish_message(const std::string& doc, std::uint64_t lsn, const std::string& message) {
        redis->command({"SET", kChannel, whole(doc, lsn)});
        redis->command({"PUBLISH", kChannel, message});
    }
    // Waits until the gateway's subscription is in place and its read after subscribing is done,
    // so that the next message is the next thing it sees.
    void wait_subscribed() {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        for (;;) {
            auto r = redis->command({"PUBSUB", "NUMSUB", kChannel});
            if (r->elements == 2 && r->element[1]->integer >= 1) break;
            REQUIRE(std::chrono::steady_clock::now() < deadline);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    std::string key() {
        auto reply = redis->command({"GET", kChannel});
        return std::string(reply->str, reply->len);
    }
};

// The doc text of a whole envelope.
std::string doc_text(const std::string& envelope) {
    auto retained = publish::retained_doc(envelope, kChannel);
    REQUIRE_MESSAGE(retained, envelope);
    REQUIRE(retained->doc);
    return *retained->doc;
}

// A client's view of one channel: the doc it holds and its version, kept by whole docs and patches
// exactly as docs/patches.md tells a client to.
struct Held {
    std::string doc;
    std::string version;
    int patches = 0, wholes = 0;

    // A whole envelope (SSE data, or a WebSocket doc message with its type and version in front).
    void take_whole(const std::string& envelope, const std::string& version_of_it) {
        doc = doc_text(envelope);
        version = version_of_it;
        ++wholes;
    }
    // A patch envelope: its base must be what is held; applying it gives the next doc.
    void take_patch(const std::string& envelope, const std::string& version_of_it) {
        std::string why;
        auto parsed = gateway::make_patch(kChannel, envelope, why);
        REQUIRE_MESSAGE(parsed, why);
        CHECK(gateway::format_version(*parsed->base) == version);  // never a patch on another base
        CHECK(parsed->version_text == version_of_it);
        patch::Patch p{parsed->patch_form, envelope.substr(parsed->patch_at, parsed->patch_size)};
        doc = patch::apply(doc, p);
        version = version_of_it;
        ++patches;
    }
};

// A WebSocket message's fields: its type, version, and the envelope it carries (the message
// without "type", "version" and "base").
struct WsMessage {
    std::string type, version, base, envelope;
};
WsMessage ws_parts(const std::string& message) {
    rapidjson::Document d;
    d.Parse(message.data(), message.size());
    REQUIRE_MESSAGE(d.IsObject(), message);
    WsMessage m;
    m.type = d["type"].GetString();
    if (m.type != "doc" && m.type != "patch") return m;
    m.version = d["version"].GetString();
    std::string head = R"({"type":")" + m.type + R"(","version":")" + m.version + "\",";
    if (m.type == "patch") {
        m.base = d["base"].GetString();
        head += R"("base":")" + m.base + "\",";
    }
    REQUIRE(message.rfind(head, 0) == 0);
    m.envelope = "{" + message.substr(head.size());
    return m;
}

std::uint64_t health_count(int port, const std::string& field) {
    auto answer = http_get(port, "/healthz");
    rapidjson::Document d;
    d.Parse(answer.body.data(), answer.body.size());
    REQUIRE_MESSAGE(d.IsObject(), answer.body);
    REQUIRE_MESSAGE(d.HasMember(field.c_str()), answer.body);
    return d[field.c_str()].GetUint64();
}

struct PatchSetup {
    Setup s{{"--public", "db:*"}};
    Writer writer{s.redis};
    int port() const { return s.gateway.port(); }
};

}  // namespace

TEST_CASE("gateway patches: an SSE client with patches=1 gets the first doc whole, then the patch") {
    PatchSetup p;
    p.writer.publish_whole(board(95), 0x100);
    SseClient sse(p.port(), "/v1/sse?channel=" + kChannel + "&patches=1");
    SseClient plain(p.port(), "/v1/sse?channel=" + kChannel);
    REQUIRE(sse.status() == 200);
    Held held;
    auto first = sse.next();
    REQUIRE(first);
    CHECK(first->event == "doc");
    held.take_whole(first->data, first->id);
    CHECK(held.version == version_text(0x100));
    REQUIRE(plain.next_doc());
    p.writer.wait_subscribed();

    std::string message = Writer::patch(set_bob(97), 0x100, 0x200);
    p.writer.publish_message(board(97), 0x200, message);
    auto second = sse.next();
    REQUIRE(second);
    CHECK(second->event == "patch");
    CHECK(second->id == version_text(0x200));
    CHECK(second->data == message);  // the patch envelope as Redis carried it
    held.take_patch(second->data, second->id);
    CHECK(held.doc == doc_text(p.writer.key()));  // byte for byte

    // A client that did not ask gets the whole doc, and GET /v1/docs serves it whole too.
    auto whole = plain.next();
    REQUIRE(whole);
    CHECK(whole->event == "doc");
    CHECK(whole->data == p.writer.key());
    auto got = http_get(p.port(), "/v1/docs/" + kChannel);
    CHECK(got.status == 200);
    CHECK(got.body == p.writer.key());
    CHECK(got.headers["etag"] == "\"" + version_text(0x200) + "\"");

    CHECK(health_count(p.port(), "patches_received") == 1);
    CHECK(health_count(p.port(), "patches_applied") == 1);
    CHECK(health_count(p.port(), "patches_sent") == 1);
    CHECK(health_count(p.port(), "whole_docs_to_patch_clients") == 1);
}

TEST_CASE("gateway patches: a WebSocket client with patches=1 gets the patch message; one without gets docs") {
    PatchSetup p;
    p.writer.publish_whole(board(95), 0x100);
    WsClient ws(p.port(), "/v1/ws?patches=1");
    WsClient plain(p.port(), "/v1/ws");
    for (auto* client : {&ws, &plain}) {
        client->send(R"({"type":"subscribe","channel":"db:board:7"})");
        REQUIRE(client->next_with("subscribed"));
    }
    Held held;
    auto first = ws.next_with("\"version\"");
    REQUIRE(first);
    auto m = ws_parts(*first);
    CHECK(m.type == "doc");
    held.take_whole(m.envelope, m.version);
    REQUIRE(plain.next_with("\"type\":\"doc\""));
    p.writer.wait_subscribed();

    std::string message = Writer::patch(set_bob(97), 0x100, 0x200);
    p.writer.publish_message(board(97), 0x200, message);
    auto second = ws.next_with("\"version\"");
    REQUIRE(second);
    m = ws_parts(*second);
    CHECK(m.type == "patch");
    CHECK(m.version == version_text(0x200));
    CHECK(m.base == version_text(0x100));
    CHECK(m.envelope == message);
    held.take_patch(m.envelope, m.version);
    CHECK(held.doc == doc_text(p.writer.key()));

    auto other = plain.next_with("\"version\"");
    REQUIRE(other);
    auto o = ws_parts(*other);
    CHECK(o.type == "doc");
    CHECK(o.envelope == p.writer.key());

    // A merge patch next, the same way.
    std::string merged = R"({"game":8,"scores":[{"player":"ann","score":1.50},{"player":"bob","score":97}],"note":"caf\u00e9 )" +
                         std::string(2000, 'x') + "\"}";
    p.writer.publish_message(merged, 0x300, Writer::patch(R"({"game":8})", 0x200, 0x300, "merge"));
    auto third = ws.next_with("\"version\"");
    REQUIRE(third);
    m = ws_parts(*third);
    CHECK(m.type == "patch");
    held.take_patch(m.envelope, m.version);
    CHECK(held.doc == merged);
}

TEST_CASE("gateway patches: a client resuming from an older version gets the whole doc") {
    PatchSetup p;
    p.writer.publish_whole(board(90), 0x80);
    p.writer.publish_whole(board(95), 0x100);
    {
        SseClient warm(p.port(), "/v1/sse?channel=" + kChannel);  // the gateway follows the channel
        REQUIRE(warm.next_doc());
        p.writer.wait_subscribed();
        p.writer.publish_message(board(97), 0x200, Writer::patch(set_bob(97), 0x100, 0x200));
        auto e = warm.next_doc();
        REQUIRE(e);
        CHECK(e->id == version_text(0x200));
        // SSE, Last-Event-ID older than the patch's base: whole.
        SseClient older(p.port(), "/v1/sse?channel=" + kChannel + "&patches=1", {{"Last-Event-ID", version_text(0x80)}});
        auto o = older.next();
        REQUIRE(o);
        CHECK(o->event == "doc");
        CHECK(o->data == p.writer.key());
        // The query's last-event-id at the base itself: the client holds it, the patch goes.
        SseClient at_base(p.port(), "/v1/sse?channel=" + kChannel + "&patches=1&last-event-id=" + version_text(0x100));
        auto b = at_base.next();
        REQUIRE(b);
        CHECK(b->event == "patch");
        CHECK(b->id == version_text(0x200));
        // WebSocket, `after` older than the base: whole.
        WsClient ws(p.port(), "/v1/ws?patches=1");
        ws.send(R"({"type":"subscribe","channel":"db:board:7","after":"3/0/80"})");
        auto m = ws.next_with("\"version\"");
        REQUIRE(m);
        auto parts = ws_parts(*m);
        CHECK(parts.type == "doc");
        CHECK(parts.envelope == p.writer.key());
    }
}

TEST_CASE("gateway patches: a patch whose base the gateway does not hold makes it read the key and send it whole") {
    PatchSetup p;
    p.writer.publish_whole(board(95), 0x100);
    SseClient sse(p.port(), "/v1/sse?channel=" + kChannel + "&patches=1");
    Held held;
    auto first = sse.next();
    REQUIRE(first);
    held.take_whole(first->data, first->id);
    p.writer.wait_subscribed();
    // 0/150 was never published: the gateway holds 0/100.
    p.writer.publish_message(board(97), 0x200, Writer::patch(set_bob(97), 0x150, 0x200));
    auto e = sse.next();
    REQUIRE(e);
    CHECK(e->event == "doc");
    CHECK(e->id == version_text(0x200));
    CHECK(e->data == p.writer.key());
    CHECK(health_count(p.port(), "patch_base_rereads") == 1);
    CHECK(health_count(p.port(), "patches_applied") == 0);
    // And the chain goes on from the doc read.
    p.writer.publish_message(board(98), 0x300, Writer::patch(set_bob(98), 0x200, 0x300));
    held.take_whole(e->data, e->id);
    auto next = sse.next();
    REQUIRE(next);
    CHECK(next->event == "patch");
    held.take_patch(next->data, next->id);
    CHECK(held.doc == doc_text(p.writer.key()));
}

TEST_CASE("gateway patches: malformed patch messages never crash the gateway nor reach a client as a patch") {
    PatchSetup p;
    p.writer.publish_whole(board(95), 0x100);
    SseClient sse(p.port(), "/v1/sse?channel=" + kChannel + "&patches=1");
    WsClient ws(p.port(), "/v1/ws?patches=1");
    ws.send(R"({"type":"subscribe","channel":"db:board:7"})");
    REQUIRE(sse.next_doc());
    REQUIRE(ws.next_with("\"type\":\"doc\""));
    p.writer.wait_subscribed();
    std::uint64_t lsn = 0x100;
    const std::vector<std::string> bad_ops = {
        R"([{"op":"replace","path":"/nope/3","value":1}])",  // a path that does not exist
        R"([{"op":"test","path":"/game","value":8}])",       // a failed test
        R"([{"op":"frobnicate","path":"/game"}])",           // no such operation
        R"({"op":"replace"})",                               // not an array
    };
    std::vector<std::string> messages(bad_ops.size());  // these made below, from the version held
    messages.push_back(R"({"channel":"db:board:7","patch":[{"op":"replace","path":"/game","value":1})");  // cut short
    messages.push_back(R"({"channel":"db:board:7","patch":[],"base_generation":3,"base_lsn":"0/100","generation":3})");
    messages.push_back(std::string(R"({"channel":"db:board:7","patch":[)") + std::string(100000, '[') + "]}");
    for (std::size_t i = 0; i < messages.size(); ++i) {
        CAPTURE(messages[i]);
        std::uint64_t next = lsn + 0x100;
        std::string message = messages[i];
        if (i < bad_ops.size()) message = Writer::patch(bad_ops[i], lsn, next);
        p.writer.publish_message(board(static_cast<int>(100 + i)), next, message);
        // The whole doc from the key, never the patch.
        auto e = sse.next();
        REQUIRE(e);
        CHECK(e->event == "doc");
        CHECK(e->id == version_text(next));
        CHECK(e->data == p.writer.key());
        auto m = ws.next_with("\"version\"");
        REQUIRE(m);
        CHECK(ws_parts(*m).type == "doc");
        lsn = next;
    }
    CHECK(health_count(p.port(), "patches_refused") == messages.size());
    CHECK(http_get(p.port(), "/v1/docs/" + kChannel).body == p.writer.key());
}

TEST_CASE("gateway patches: a burst of patches to a slow client ends with the whole newest doc") {
    Setup s({"--public", "db:*", "--slow-client-timeout", "60s"});
    Writer writer(s.redis);
    writer.publish_whole(board(0), 0x1000);
    SseClient slow(s.gateway.port(), "/v1/sse?channel=" + kChannel + "&patches=1", {}, 4 * 1024);
    REQUIRE(slow.status() == 200);
    Held held;
    auto first = slow.next();
    REQUIRE(first);
    held.take_whole(first->data, first->id);
    writer.wait_subscribed();
    // Far more patch events than the socket buffers hold, unread.
    constexpr int kVersions = 3000;
    for (int n = 1; n <= kVersions; ++n)
        writer.publish_message(board(n), 0x1000 + static_cast<std::uint64_t>(n),
                               Writer::patch(set_bob(n), 0x1000 + static_cast<std::uint64_t>(n - 1),
                                             0x1000 + static_cast<std::uint64_t>(n)));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::string newest = version_text(0x1000 + kVersions);
    while (held.version != newest) {
        auto e = slow.next(std::chrono::milliseconds(5000));
        REQUIRE(e);
        if (e->event == "doc") held.take_whole(e->data, e->id);
        else if (e->event == "patch") held.take_patch(e->data, e->id);
    }
    CHECK(held.doc == doc_text(writer.key()));
    MESSAGE("the slow client took " << held.patches << " patches and " << held.wholes << " whole docs for "
                                    << kVersions + 1 << " versions");
    CHECK(held.wholes >= 2);  // it fell behind: a whole doc brought it to a newer version
    CHECK(held.patches + held.wholes < kVersions + 1);
}

TEST_CASE("gateway patches: a stream of two channels sends a patch under the stream's cursor") {
    PatchSetup p;
    const std::string other = "db:board:8";
    p.writer.publish_whole(board(95), 0x100);
    std::string other_doc = Writer::whole(board(50), 0x100);
    other_doc.replace(other_doc.find(kChannel), kChannel.size(), other);
    p.writer.redis->command({"SET", other, other_doc});
    SseClient sse(p.port(), "/v1/sse?channel=" + kChannel + "&channel=" + other + "&patches=1");
    Held held;
    for (int i = 0; i < 2; ++i) {
        auto e = sse.next();
        REQUIRE(e);
        CHECK(e->event == "doc");
        if (e->data.find(kChannel) != std::string::npos) held.take_whole(e->data, version_text(0x100));
    }
    p.writer.wait_subscribed();
    p.writer.publish_message(board(97), 0x200, Writer::patch(set_bob(97), 0x100, 0x200));
    auto e = sse.next();
    REQUIRE(e);
    CHECK(e->event == "patch");
    CHECK(e->id == version_text(0x200) + "," + version_text(0x100));
    held.take_patch(e->data, version_text(0x200));
    CHECK(held.doc == doc_text(p.writer.key()));
}

TEST_CASE("gateway patches: patches= takes 1 or 0") {
    PatchSetup p;
    SseClient bad(p.port(), "/v1/sse?channel=" + kChannel + "&patches=yes");
    CHECK(bad.status() == 400);
    CHECK(bad.error_body().find("patches=") != std::string::npos);
    SseClient off(p.port(), "/v1/sse?channel=" + kChannel + "&patches=0");
    CHECK(off.status() == 200);
}

TEST_CASE("gateway patches: a second text at the version held is never a patch's base") {
    // Two computes of one version with different texts: the key holds the later; the next patch is
    // made from it. The gateway must not apply that patch to the first text, nor send it to a
    // client holding the first.
    PatchSetup p;
    std::string swapped = R"({"game":7,"scores":[{"player":"bob","score":95},{"player":"ann","score":1.50}],"note":"caf\u00e9 )" +
                          std::string(2000, 'x') + "\"}";
    p.writer.publish_whole(board(95), 0x100);
    SseClient sse(p.port(), "/v1/sse?channel=" + kChannel + "&patches=1");
    REQUIRE(sse.status() == 200);
    auto first = sse.next();
    REQUIRE(first);
    CHECK(first->data == Writer::whole(board(95), 0x100));
    p.writer.wait_subscribed();

    p.writer.publish_whole(swapped, 0x100);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::string next = swapped;
    next.replace(next.find("95"), 2, "97");
    p.writer.publish_message(next, 0x200, Writer::patch(R"([{"op":"replace","path":"/scores/0/score","value":97}])", 0x100, 0x200));
    auto second = sse.next();
    REQUIRE(second);
    CHECK(second->event == "doc");  // whole: the client's 0/100 may be the other text
    CHECK(second->id == version_text(0x200));
    CHECK(second->data == p.writer.key());

    // The gateway holds what Redis holds: a new subscriber and GET /v1/docs get it.
    SseClient late(p.port(), "/v1/sse?channel=" + kChannel + "&patches=1");
    auto held = late.next();
    REQUIRE(held);
    CHECK(held->data == p.writer.key());
    CHECK(http_get(p.port(), "/v1/docs/" + kChannel).body == p.writer.key());
    CHECK(health_count(p.port(), "patches_applied") == 0);
    CHECK(health_count(p.port(), "patch_base_rereads") == 1);
}
