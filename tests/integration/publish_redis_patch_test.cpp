// Patches through Redis (docs/patches.md) against a real redis-server, and a real cluster: the key
// always holds the whole doc, the channel carries the patch only when the key held its base, and a
// subscriber that applies every patch it receives (and GETs the key otherwise) ends byte-identical to
// the key after a random run of edits.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "envelope/envelope.hpp"
#include "patch/json_patch.hpp"
#include "publish/patcher.hpp"
#include "publish/redis_cluster_sink.hpp"
#include "publish/redis_script.hpp"
#include "publish/redis_sink.hpp"
#include "redis/keys.hpp"
#include "redis_server.hpp"

using docsync::DocVersion;
using docsync::publish::EnvelopeKind;
using docsync::publish::Patcher;
using docsync::publish::PatcherOptions;
using docsync::publish::RedisConnection;
using docsync::publish::reply_text;

namespace {

// A subscribed connection: next() is the next message's payload, whatever the pub/sub flavour.
class Listener {
public:
    Listener(std::unique_ptr<RedisConnection> conn, const std::string& verb, const std::string& channel)
        : conn_(std::move(conn)) {
        conn_->command({verb, channel});
    }
    std::string next() {
        for (;;) {
            void* raw = nullptr;
            REQUIRE(redisGetReply(conn_->context(), &raw) == REDIS_OK);
            docsync::publish::Reply r(static_cast<redisReply*>(raw));
            if (r->type != REDIS_REPLY_ARRAY || r->elements != 3) continue;
            std::string kind = reply_text(r->element[0]);
            if (kind == "message" || kind == "smessage") return reply_text(r->element[2]);
        }
    }

private:
    std::unique_ptr<RedisConnection> conn_;
};

// Random edits of a doc: records inserted, removed and changed in an array, a nested object's keys,
// numbers at the edges, unicode and escapes.
class Edits {
public:
    explicit Edits(unsigned seed) : random_(seed) {
        for (int i = 0; i < 12; ++i) items_.push_back(item());
    }
    std::string next() {
        switch (pick(6)) {
            case 0: items_.insert(items_.begin() + static_cast<long>(pick(items_.size() + 1)), item()); break;
            case 1: if (items_.size() > 1) items_.erase(items_.begin() + static_cast<long>(pick(items_.size()))); break;
            case 2: if (!items_.empty()) items_[pick(items_.size())] = item(); break;
            case 3: meta_[key()] = value(); break;
            case 4: if (!meta_.empty()) meta_.erase(std::next(meta_.begin(), static_cast<long>(pick(meta_.size())))); break;
            default: if (items_.size() > 2) std::swap(items_[pick(items_.size())], items_[pick(items_.size())]); break;
        }
        std::string out = R"({"board":7,"items":[)";
        for (std::size_t i = 0; i < items_.size(); ++i) out += (i ? "," : "") + items_[i];
        out += R"(],"meta":{)";
        bool first = true;
        for (const auto& [k, v] : meta_) {
            out += (first ? "\"" : ",\"") + k + "\":" + v;
            first = false;
        }
        return out + "}}";
    }

private:
    std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(random_); }
    std::string key() { return "k" + std::to_string(pick(20)); }
    std::string value() {
        static const char* const values[] = {"0", "-0", "1.50", "1e400", "-9223372036854775809", "18446744073709551616",
                                             "3.141592653589793238462643383279", "true", "null", R"("\u00e9t\u00e9 \ud83d\ude00")",
                                             R"("caf\u00e9")", "\"\xc3\xa9l\xc3\xa8ve\"", R"("a\"b\\c\n")", "[]", "{}", R"([1,[2,[3]]])"};
        return values[pick(sizeof values / sizeof values[0])];
    }
    std::string item() {
        return R"({"player":"p)" + std::to_string(pick(1000)) + R"(","score":)" + value() + R"(,"tags":[)" +
               std::to_string(pick(9)) + "]}";
    }
    std::mt19937 random_;
    std::vector<std::string> items_;
    std::map<std::string, std::string> meta_;
};

// What a subscriber holds of one channel, rebuilt from messages alone (GET on any mismatch).
struct Held {
    std::string doc;
    DocVersion version;
    int patches = 0;
    int wholes = 0;
    int gets = 0;
};

void take(Held& held, const std::string& message, const std::function<std::string()>& get_key) {
    auto head = docsync::publish::parse_envelope(message);
    REQUIRE_MESSAGE(head, message);
    std::string body = message.substr(head->doc_at, head->doc_size);
    if (!head->is_patch()) {
        held.doc = body;
        held.version = head->version;
        ++held.wholes;
        return;
    }
    if (held.version == *head->base) {
        docsync::patch::Patch patch{head->kind == EnvelopeKind::JsonPatch ? docsync::patch::Form::JsonPatch
                                                                         : docsync::patch::Form::MergePatch,
                                    body};
        held.doc = docsync::patch::apply(held.doc, patch);
        held.version = head->version;
        ++held.patches;
        return;
    }
    auto whole = docsync::publish::retained_doc(get_key(), head->channel);
    REQUIRE(whole);
    held.doc = whole->doc.value_or("null");
    held.version = whole->version;
    ++held.gets;
}

// Publishes `steps` random edits of one doc through `publish`, checks each message and the key, and
// now and then SETs the key to another version first (someone else wrote it), after which the next
// message must be the whole doc.
void run_random_publishes(const std::function<void(const std::string&, DocVersion)>& publish, Listener& listener,
                          const std::function<std::string()>& get_key, const std::function<void(const std::string&)>& set_key,
                          const std::string& channel, Patcher& patcher, unsigned seed, int steps) {
    Edits edits(seed);
    Held held;
    std::mt19937 random(seed + 1);
    int forced = 0;
    std::uint64_t saved = 0;
    for (int step = 1; step <= steps; ++step) {
        std::string doc = edits.next();
        DocVersion version{2, static_cast<docsync::Lsn>(step) * 0x100};
        bool meddle = step > 2 && random() % 7 == 0;
        if (meddle) {
            // Another writer's doc at a version between the last one and this one.
            set_key(docsync::publish::make_envelope(channel, std::string(R"({"other":true})"),
                                                    DocVersion{2, version.lsn - 0x80}));
            ++forced;
        }
        publish(doc, version);
        std::string message = listener.next();
        auto head = docsync::publish::parse_envelope(message);
        REQUIRE(head);
        CHECK(head->version == version);
        if (meddle) CHECK_FALSE(head->is_patch());  // the key did not hold the base
        if (head->is_patch()) {
            CHECK(*head->base == held.version);  // the base is what the previous message carried
            std::size_t whole = docsync::publish::make_envelope(channel, doc, version).size();
            CHECK(message.size() * 2 <= whole);
            saved += whole - message.size();
        }
        // The key is always the whole doc.
        std::string key = get_key();
        CHECK(key == docsync::publish::make_envelope(channel, doc, version));
        take(held, message, get_key);
        CHECK(held.version == version);
        REQUIRE_MESSAGE(held.doc == docsync::publish::compact_json(doc), "step " << step << ": " << message);
    }
    CHECK(held.gets == 0);  // a subscriber that saw every message never needs the key
    CHECK(held.patches > steps / 3);  // the rest: after a meddling SET, or a patch not at most half the doc
    CHECK(forced > 0);
    CHECK(patcher.counters().patches == static_cast<std::uint64_t>(held.patches));
    CHECK(patcher.counters().bytes_saved == saved);
}

docsync::publish::RedisSinkOptions patch_options(std::uint64_t cache_bytes) {
    docsync::publish::RedisSinkOptions options;
    options.patcher = std::make_shared<Patcher>(PatcherOptions{cache_bytes, 64});
    return options;
}

// One Redis server, a sink publishing to it with patches on (a patch cache of kCacheBytes), a
// subscriber to the channel db:board:7, and a client for the key.
template <std::uint64_t kCacheBytes = (1 << 20)>
struct RedisPatchSetup {
    docsync::testing::RedisServer redis;
    docsync::publish::RedisSinkOptions options = patch_options(kCacheBytes);
    docsync::publish::RedisSink sink{redis.address(), options};
    const std::string channel = "db:board:7";
    Listener listener{redis.client(), "SUBSCRIBE", channel};
    std::unique_ptr<RedisConnection> client = redis.client();
};

// The same on a cluster of three masters: the subscriber and the client on the master of the
// channel's key.
template <std::uint64_t kCacheBytes = (1 << 20)>
struct RedisClusterPatchSetup {
    static int known(int owner) {
        REQUIRE(owner >= 0);
        return owner;
    }
    docsync::testing::RedisTestCluster cluster{3};
    docsync::publish::RedisSinkOptions options = patch_options(kCacheBytes);
    docsync::publish::RedisClusterSink sink{cluster.address(), options};
    const std::string channel = "db:board:7";
    const std::string key = docsync::publish::cluster_key(channel);
    int owner = known(cluster.owner_of(docsync::publish::key_slot(key)));
    Listener listener{cluster.node(owner).client(), "SSUBSCRIBE", key};
    std::unique_ptr<RedisConnection> client = cluster.node(owner).client();
};

}  // namespace

TEST_CASE_FIXTURE(RedisPatchSetup<>,
                  "redis patches: the key holds the whole doc, the message a patch from the base it held") {
    auto get_key = [&] { return reply_text(client->command({"GET", channel}).get()); };

    const std::string big(200, 'x');
    // Where the key held no version (a new doc, or a key lost: readers may hold another text at the
    // same version), the doc is no base yet: the script answers 3, and the next version goes whole.
    sink.publish(channel, std::string(R"({"score":0,"pad":")") + big + "\"}", DocVersion{1, 0x80});
    CHECK_FALSE(docsync::publish::parse_envelope(listener.next())->is_patch());
    sink.publish(channel, std::string(R"({"score":1,"pad":")") + big + "\"}", DocVersion{1, 0x100});
    CHECK_FALSE(docsync::publish::parse_envelope(listener.next())->is_patch());  // nothing to patch from
    sink.publish(channel, std::string(R"({"score":2,"pad":")") + big + "\"}", DocVersion{1, 0x200});
    {
        auto patch = listener.next();
        auto head = docsync::publish::parse_envelope(patch);
        REQUIRE(head);
        REQUIRE(head->is_patch());
        CHECK(*head->base == DocVersion{1, 0x100});
        CHECK(head->version == DocVersion{1, 0x200});
        // {"score":2} as a merge patch or a replace of /score: either way a few dozen bytes.
        CHECK(patch.size() < 160);
    }
    CHECK(get_key() == docsync::publish::make_envelope(channel, std::string(R"({"score":2,"pad":")") + big + "\"}",
                                                       DocVersion{1, 0x200}));
    // Someone SET the key to another version: the next message is whole, and the key whole too.
    client->command({"SET", channel,
                     docsync::publish::make_envelope(channel, std::string("{}"), DocVersion{1, 0x250})});
    sink.publish(channel, std::string(R"({"score":3,"pad":")") + big + "\"}", DocVersion{1, 0x300});
    auto message = listener.next();
    CHECK(message == get_key());
    CHECK_FALSE(docsync::publish::parse_envelope(message)->is_patch());
    // A stale doc changes nothing: not published, and the cache still patches from 0/300.
    sink.publish(channel, std::string(R"({"score":0,"pad":")") + big + "\"}", DocVersion{1, 0x280});
    sink.publish(channel, std::string(R"({"score":4,"pad":")") + big + "\"}", DocVersion{1, 0x400});
    auto head = docsync::publish::parse_envelope(listener.next());
    REQUIRE(head->is_patch());
    CHECK(*head->base == DocVersion{1, 0x300});
    CHECK(head->version == DocVersion{1, 0x400});
    // A tombstone is whole, and leaves no base.
    sink.publish(channel, std::nullopt, DocVersion{1, 0x500});
    CHECK(docsync::publish::parse_envelope(listener.next())->kind == EnvelopeKind::Doc);
    sink.publish(channel, std::string(R"({"score":5,"pad":")") + big + "\"}", DocVersion{1, 0x600});
    CHECK_FALSE(docsync::publish::parse_envelope(listener.next())->is_patch());
}

TEST_CASE_FIXTURE(RedisPatchSetup<>,
                  "redis patches: a subscriber rebuilding from the messages ends byte-identical to the key") {
    run_random_publishes([&](const std::string& doc, DocVersion v) { sink.publish(channel, doc, v); }, listener,
                         [&] { return reply_text(client->command({"GET", channel}).get()); },
                         [&](const std::string& envelope) { client->command({"SET", channel, envelope}); }, channel,
                         *options.patcher, 11, 200);
}

TEST_CASE_FIXTURE(RedisClusterPatchSetup<>,
                  "redis cluster patches: the same over SPUBLISH on the key's master") {
    run_random_publishes([&](const std::string& doc, DocVersion v) { sink.publish(channel, doc, v); }, listener,
                         [&] { return reply_text(client->command({"GET", key}).get()); },
                         [&](const std::string& envelope) { client->command({"SET", key, envelope}); }, channel,
                         *options.patcher, 23, 150);
}

namespace {

// A doc published at one version with two texts (a query without ORDER BY computed twice), the
// cache entry of the first dropped in between (evicted here: the cache fits one entry): the script
// answers 3 for the second, and the next version's message is the whole doc, since subscribers keep
// the first text at that version (an equal version is not newer) and a patch from the second would
// apply to the wrong base.
void equal_version_after_drop(const std::function<void(const std::string&, const std::optional<std::string>&,
                                                       DocVersion)>& publish,
                              Listener& listener, const std::string& channel, Patcher& patcher) {
    const std::string pad(2000, 'p');
    auto text = [&](const std::string& items, int a) {
        return R"({"a":)" + std::to_string(a) + R"(,"items":)" + items + R"(,"pad":")" + pad + "\"}";
    };
    publish(channel, text("[1,2]", 1), DocVersion{1, 0x100});
    CHECK_FALSE(docsync::publish::parse_envelope(listener.next())->is_patch());
    // Another channel's doc evicts this channel's entry.
    publish("db:other:1", text("[0]", 0), DocVersion{1, 0x100});
    REQUIRE(patcher.counters().cache_entries == 1);
    publish(channel, text("[2,1]", 1), DocVersion{1, 0x100});
    CHECK_FALSE(docsync::publish::parse_envelope(listener.next())->is_patch());
    publish(channel, text("[2,1]", 2), DocVersion{1, 0x200});
    auto message = listener.next();
    auto head = docsync::publish::parse_envelope(message);
    REQUIRE(head);
    CHECK(head->version == DocVersion{1, 0x200});
    CHECK_MESSAGE(!head->is_patch(), "a patch from the second text at 0/100, which subscribers lack: " << message);
    // The whole doc makes a clean base again: the version after it is a patch.
    publish(channel, text("[2,1]", 3), DocVersion{1, 0x300});
    CHECK(docsync::publish::parse_envelope(listener.next())->is_patch());
}

}  // namespace

TEST_CASE_FIXTURE(
    RedisPatchSetup<4000>,
    "redis patches: a version published again with another text after its entry was dropped is no base") {
    equal_version_after_drop([&](const std::string& c, const std::optional<std::string>& doc,
                                 DocVersion v) { sink.publish(c, doc, v); },
                             listener, channel, *options.patcher);
}

TEST_CASE_FIXTURE(RedisClusterPatchSetup<4000>,
                  "redis cluster patches: a version published again with another text after its entry was "
                  "dropped is no base") {
    equal_version_after_drop([&](const std::string& c, const std::optional<std::string>& doc,
                                 DocVersion v) { sink.publish(c, doc, v); },
                             listener, channel, *options.patcher);
}

TEST_CASE("redis script: 3 for a doc taken at the version the key held, with no patch published") {
    docsync::testing::RedisServer redis;
    auto client = redis.client();
    const std::string channel = "db:board:7";
    Listener listener(redis.client(), "SUBSCRIBE", channel);
    const char* script = docsync::publish::doc_script(docsync::publish::ScriptKind::Single);
    auto run = [&](const std::string& doc, DocVersion version, std::optional<DocVersion> base) {
        auto call = docsync::publish::script_call(channel, channel, doc, version, std::chrono::seconds(60));
        if (base)
            call.add_patch(docsync::publish::make_patch_envelope(channel, EnvelopeKind::JsonPatch, "[]", *base, version),
                           *base);
        auto reply = client->command(call.args(docsync::publish::ScriptKind::Single, script, true));
        REQUIRE(reply->type == REDIS_REPLY_INTEGER);
        return reply->integer;
    };
    // A key that held no version: 3 too (readers may still hold a text at this version).
    CHECK(run(R"({"a":1})", DocVersion{1, 0x100}, std::nullopt) == 3);
    CHECK_FALSE(docsync::publish::parse_envelope(listener.next())->is_patch());
    CHECK(run(R"({"a":2})", DocVersion{1, 0x100}, std::nullopt) == 3);
    // Taken: the key holds the second text and the whole doc went out.
    CHECK(listener.next() ==
          docsync::publish::make_envelope(channel, std::string(R"({"a":2})"), DocVersion{1, 0x100}));
    // Even with a patch from the held version (no plan makes one), an equal version goes whole.
    CHECK(run(R"({"a":3})", DocVersion{1, 0x100}, DocVersion{1, 0x100}) == 3);
    CHECK_FALSE(docsync::publish::parse_envelope(listener.next())->is_patch());
    CHECK(run(R"({"a":4})", DocVersion{1, 0x200}, DocVersion{1, 0x100}) == 2);
    CHECK(docsync::publish::parse_envelope(listener.next())->is_patch());
    CHECK(run(R"({"a":0})", DocVersion{1, 0x180}, std::nullopt) == 0);
    // Over an older version, whole: 1.
    CHECK(run(R"({"a":5})", DocVersion{1, 0x300}, std::nullopt) == 1);
    CHECK_FALSE(docsync::publish::parse_envelope(listener.next())->is_patch());
}
