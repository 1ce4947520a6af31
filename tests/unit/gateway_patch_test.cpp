// Patch messages at the gateway's hub, against a fake FeedPort (docs/patches.md): a patch whose
// base the hub holds is applied to it byte for byte; one it cannot use (no base held, another base,
// a patch that does not apply, a malformed message, one that replaced another in the Inbox) makes
// it read the key again and never reaches a follower; a re-read asked for while one is out is never
// dropped. A second text at one version replaces the held one and no patch applies on it. And the
// Outbox's choice per client: the patch only when the version the client holds is the patch's base.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>

#include <deque>
#include <set>

#include "gateway/hub.hpp"
#include "gateway/patch_forms.hpp"
#include "gateway/session.hpp"

using namespace docsync;
using namespace docsync::gateway;

namespace {

class FakeFeed : public FeedPort {
public:
    std::set<std::string> following;
    std::deque<std::pair<std::string, std::function<void(FeedRead)>>> reads;  // waiting, oldest first

    void set_following(const std::string& channel, bool follow) override {
        if (follow) following.insert(channel);
        else following.erase(channel);
    }
    void read(const std::string& channel, std::function<void(FeedRead)> done) override {
        reads.emplace_back(channel, std::move(done));
    }
    void announce(const std::string&, bool) override {}
    void probe(std::chrono::milliseconds, std::function<void(FeedRead)>) override {}
    bool up() const override { return true; }

    void answer(std::optional<std::string> value) {
        REQUIRE(!reads.empty());
        auto done = std::move(reads.front().second);
        reads.pop_front();
        done(FeedRead{true, std::move(value), {}});
    }
};

struct Recorder : Follower {
    std::vector<DocPtr> docs;
    void on_doc(const DocPtr& doc) override { docs.push_back(doc); }
};

const std::string kChannel = "db:board:7";

// A doc of the board at score `bob`, with a key order and number spellings a re-serializer would
// not keep.
std::string board(int bob) {
    return R"({"game":7,"scores":[{"player":"ann","score":1.50},{"player":"bob","score":)" + std::to_string(bob) +
           R"(}],"big":123456789012345678901234567890,"name":"caf\u00e9"})";
}

std::string whole(const std::string& doc, std::uint64_t lsn) {
    return R"({"channel":")" + kChannel + R"(","doc":)" + doc + R"(,"generation":3,"lsn":")" + format_lsn(lsn) + "\"}";
}

std::string patch_of(const std::string& ops, std::uint64_t base, std::uint64_t lsn, const char* key = "patch") {
    return R"({"channel":")" + kChannel + "\",\"" + key + "\":" + ops + R"(,"base_generation":3,"base_lsn":")" +
           format_lsn(base) + R"(","generation":3,"lsn":")" + format_lsn(lsn) + "\"}";
}

std::string set_bob(int score) { return R"([{"op":"replace","path":"/scores/1/score","value":)" + std::to_string(score) + "}]"; }

struct Fixture {
    boost::asio::io_context io;
    FakeFeed feed;
    Hub hub;
    Recorder client;
    void settle() {
        io.restart();
        io.poll();
    }
    // Followed and subscribed, holding `doc` at 0/100.
    explicit Fixture(std::size_t max_queued_bytes = 64 * 1024 * 1024) : hub(io, feed, 100, max_queued_bytes) {
        hub.follow(kChannel, &client);
        feed.answer(whole(board(95), 0x100));
        settle();
        hub.on_subscribed(kChannel);
        feed.answer(whole(board(95), 0x100));
        settle();
        REQUIRE(client.docs.size() == 1);
        REQUIRE(feed.reads.empty());
    }
};

}  // namespace

TEST_CASE("gateway patches: a patch on the held version is applied byte for byte and keeps its forms") {
    Fixture f;
    std::string message = patch_of(set_bob(97), 0x100, 0x200);
    f.hub.receive(kChannel, message);
    f.settle();
    REQUIRE(f.client.docs.size() == 2);
    const Doc& doc = *f.client.docs.back();
    CHECK(doc.envelope == whole(board(97), 0x200));  // what the worker's script wrote to the key
    CHECK_FALSE(doc.patch_only);
    REQUIRE(doc.base);
    CHECK(*doc.base == DocVersion{3, 0x100});
    CHECK(doc.patch_envelope == message);
    CHECK(doc.patch_ws_message == R"({"type":"patch","version":"3/0/200","base":"3/0/100",)" + message.substr(1));
    CHECK(doc.patch_sse_head == "event: patch\nid: 3/0/200\ndata: ");
    CHECK(doc.patch_sse_data() == message);
    CHECK(doc.ws_message == R"({"type":"doc","version":"3/0/200",)" + whole(board(97), 0x200).substr(1));
    CHECK(f.feed.reads.empty());
    // A merge patch on top.
    f.hub.receive(kChannel, patch_of(R"({"name":"x"})", 0x200, 0x300, "merge"));
    f.settle();
    REQUIRE(f.client.docs.size() == 3);
    CHECK(f.client.docs.back()->envelope ==
          whole(R"({"game":7,"scores":[{"player":"ann","score":1.50},{"player":"bob","score":97}],"big":123456789012345678901234567890,"name":"x"})",
                0x300));
    auto stats = f.hub.stats();
    CHECK(stats.patches_received == 2);
    CHECK(stats.patches_applied == 2);
    CHECK(stats.patch_base_rereads == 0);
}

TEST_CASE("gateway patches: a patch from a base the hub does not hold reads the key, never applies") {
    Fixture f;
    f.hub.receive(kChannel, patch_of(set_bob(97), 0x150, 0x200));  // 0/150 never came
    f.settle();
    CHECK(f.client.docs.size() == 1);
    REQUIRE(f.feed.reads.size() == 1);
    f.feed.answer(whole(board(97), 0x200));
    f.settle();
    REQUIRE(f.client.docs.size() == 2);
    CHECK_FALSE(f.client.docs.back()->base);  // a whole doc: every client gets it whole
    CHECK(f.hub.stats().patch_base_rereads == 1);
    // An older or equal version is stale, not read again.
    auto stale = f.hub.stats().stale;
    f.hub.receive(kChannel, patch_of(set_bob(1), 0x100, 0x200));
    f.settle();
    CHECK(f.feed.reads.empty());
    CHECK(f.hub.stats().stale == stale + 1);
}

TEST_CASE("gateway patches: a patch that replaced another in the Inbox is not applied to the wrong base") {
    Fixture f;
    // Two messages arrive before the hub's thread takes any: the Inbox keeps the newer only, whose
    // base (0/200) the hub never held.
    f.hub.receive(kChannel, patch_of(set_bob(97), 0x100, 0x200));
    f.hub.receive(kChannel, patch_of(set_bob(99), 0x200, 0x300));
    f.settle();
    CHECK(f.client.docs.size() == 1);
    REQUIRE(f.feed.reads.size() == 1);
    f.feed.answer(whole(board(99), 0x300));
    f.settle();
    REQUIRE(f.client.docs.size() == 2);
    CHECK(f.client.docs.back()->envelope == whole(board(99), 0x300));
    CHECK(f.hub.stats().replaced == 1);
}

TEST_CASE("gateway patches: one read at a time for patches it cannot use, and once more if it comes back older") {
    Fixture f;
    f.hub.receive(kChannel, patch_of(set_bob(97), 0x150, 0x200));  // a base never held
    f.settle();
    REQUIRE(f.feed.reads.size() == 1);
    // More arrive while the read is out: no second read now (which would supersede the first)...
    f.hub.receive(kChannel, patch_of(set_bob(98), 0x250, 0x300));
    f.settle();
    f.hub.receive(kChannel, patch_of(set_bob(99), 0x350, 0x400));
    f.settle();
    CHECK(f.feed.reads.size() == 1);
    // ...but the read answered before 0/400 was published: read once more.
    f.feed.answer(whole(board(97), 0x200));
    f.settle();
    REQUIRE(f.feed.reads.size() == 1);
    f.feed.answer(whole(board(99), 0x400));
    f.settle();
    CHECK(f.feed.reads.empty());  // it has what the messages named: done
    REQUIRE(f.client.docs.size() == 3);
    CHECK(f.client.docs.back()->envelope == whole(board(99), 0x400));
    // A read that answers the newest named needs no other, and a later patch applies on it.
    f.hub.receive(kChannel, patch_of(set_bob(100), 0x400, 0x500));
    f.settle();
    CHECK(f.feed.reads.empty());
    CHECK(f.client.docs.back()->envelope == whole(board(100), 0x500));
}

TEST_CASE("gateway patches: malformed patch messages and patches that do not apply read the key") {
    Fixture f;
    const std::vector<std::string> bad = {
        R"({"channel":"db:board:7","patch":[{"op":"replace","path":"/scores/1/score","value":97})",  // cut short
        patch_of(R"([{"op":"replace","path":"/nope/3","value":1}])", 0x100, 0x200),               // no such path
        patch_of(R"([{"op":"test","path":"/game","value":8}])", 0x100, 0x200),                    // a failed test
        patch_of(R"({"op":"replace"})", 0x100, 0x200),                                            // not an array
        patch_of(set_bob(97), 0x200, 0x200),                                                      // base not older
        R"({"channel":"db:board:8","patch":[],"base_generation":3,"base_lsn":"0/100","generation":3,"lsn":"0/200"})",
        R"({"channel":"db:board:7","patch":[],"base_generation":3,"base_lsn":"zz","generation":3,"lsn":"0/200"})",
    };
    for (const auto& message : bad) {
        CAPTURE(message);
        f.hub.receive(kChannel, message);
        f.settle();
        CHECK(f.client.docs.size() == 1);  // nothing reached the follower
        REQUIRE(f.feed.reads.size() == 1);  // the key is read instead
        f.feed.answer(whole(board(95), 0x100));
        f.settle();
    }
    CHECK(f.hub.stats().patches_refused == bad.size());
    CHECK(f.hub.stats().patch_base_rereads == 0);
}

TEST_CASE("gateway patches: a client gets the patch only when it holds its base") {
    DocPtr base = make_doc(kChannel, whole(board(95), 0x100));
    std::string why;
    DocPtr incoming = make_patch(kChannel, patch_of(set_bob(97), 0x100, 0x200), why);
    REQUIRE(incoming);
    DocPtr next = apply_patch(*base, *incoming);
    DocPtr after = apply_patch(*next, *make_patch(kChannel, patch_of(set_bob(98), 0x200, 0x300), why));

    Outbox box;
    box.add(kChannel, std::nullopt);
    bool patch = true;
    REQUIRE(box.offer(next));  // a new client holds nothing: whole
    CHECK(box.next(&patch) == next);
    CHECK_FALSE(patch);
    REQUIRE(box.offer(after));  // it holds 0/200, the base: the patch
    CHECK(box.next(&patch) == after);
    CHECK(patch);

    Outbox resumed;  // resumed from an older version than the base: whole
    resumed.add(kChannel, DocVersion{3, 0x50});
    REQUIRE(resumed.offer(next));
    CHECK(resumed.next(&patch) == next);
    CHECK_FALSE(patch);

    Outbox slow;  // its pending 0/200 replaced by 0/300 before it was sent: whole
    slow.add(kChannel, DocVersion{3, 0x100});
    REQUIRE(slow.offer(next));
    REQUIRE(slow.offer(after));
    CHECK(slow.next(&patch) == after);
    CHECK_FALSE(patch);

    // A patch no shorter than the doc keeps no patch forms: whole for everyone.
    DocPtr tiny = make_doc(kChannel, whole("[1]", 0x100));
    DocPtr grown = apply_patch(*tiny, *make_patch(kChannel, patch_of(R"([{"op":"add","path":"/-","value":2}])", 0x100, 0x200), why));
    CHECK(grown->envelope == whole("[1,2]", 0x200));
    CHECK_FALSE(grown->base);
}

TEST_CASE("gateway patches: a doc the Inbox cannot keep while a re-read is out reads the key once more") {
    Fixture f(300);  // a board's envelope fits; one with a pad of 400 bytes does not
    auto big = [](int bob, std::uint64_t lsn) {
        return whole(R"({"bob":)" + std::to_string(bob) + R"(,"pad":")" + std::string(400, 'x') + "\"}", lsn);
    };
    f.hub.receive(kChannel, big(96, 0x200));  // overflows: the key is read instead
    f.settle();
    REQUIRE(f.feed.reads.size() == 1);
    // The read ran in Redis (it answers 0/200); then a newer doc, too big as well, is written and
    // published: its read is asked for while the first is out, of no known version.
    f.hub.receive(kChannel, big(97, 0x300));
    f.settle();
    CHECK(f.feed.reads.size() == 1);  // one read at a time
    f.feed.answer(big(96, 0x200));
    f.settle();
    REQUIRE(f.feed.reads.size() == 1);  // read once more: the first answer may predate 0/300
    f.feed.answer(big(97, 0x300));
    f.settle();
    CHECK(f.feed.reads.empty());
    REQUIRE_FALSE(f.client.docs.empty());
    CHECK(f.client.docs.back()->envelope == big(97, 0x300));
    CHECK(f.hub.stats().overflowed == 2);

    // A malformed patch while a read is out is not dropped either.
    f.hub.receive(kChannel, big(98, 0x400));
    f.settle();
    REQUIRE(f.feed.reads.size() == 1);
    f.hub.receive(kChannel, R"({"channel":"db:board:7","patch":[)");
    f.settle();
    f.feed.answer(big(98, 0x400));
    f.settle();
    REQUIRE(f.feed.reads.size() == 1);
    f.feed.answer(big(99, 0x500));
    f.settle();
    CHECK(f.feed.reads.empty());
    CHECK(f.client.docs.back()->envelope == big(99, 0x500));
}

namespace {
// board(bob) with its scores in the other order: a second compute of one version with another text.
std::string board_swapped(int bob) {
    return R"({"game":7,"scores":[{"player":"bob","score":)" + std::to_string(bob) +
           R"(},{"player":"ann","score":1.50}],"big":123456789012345678901234567890,"name":"caf\u00e9"})";
}
}  // namespace

TEST_CASE("gateway patches: a second text at the held version replaces it and no patch applies on it") {
    Fixture f;
    f.hub.receive(kChannel, whole(board_swapped(95), 0x100));  // what the key holds now
    f.settle();
    REQUIRE(f.client.docs.size() == 2);
    CHECK(f.client.docs.back()->envelope == whole(board_swapped(95), 0x100));
    CHECK(f.client.docs.back()->retexted);
    Recorder late;  // a new follower gets the text Redis holds
    f.hub.follow(kChannel, &late);
    REQUIRE(late.docs.size() == 1);
    CHECK(late.docs.back()->envelope == whole(board_swapped(95), 0x100));
    // The same text again is stale, not another replacement.
    f.hub.receive(kChannel, whole(board_swapped(95), 0x100));
    f.settle();
    CHECK(f.client.docs.size() == 2);

    // A patch from 0/100 (made from either text: the version cannot tell) is never applied: the key is read.
    std::string swapped_set = R"([{"op":"replace","path":"/scores/0/score","value":97}])";
    f.hub.receive(kChannel, patch_of(swapped_set, 0x100, 0x200));
    f.settle();
    CHECK(f.client.docs.size() == 2);
    REQUIRE(f.feed.reads.size() == 1);
    f.feed.answer(whole(board_swapped(97), 0x200));
    f.settle();
    REQUIRE(f.client.docs.size() == 3);
    CHECK(f.client.docs.back()->envelope == whole(board_swapped(97), 0x200));
    CHECK_FALSE(f.client.docs.back()->base);  // whole for every client
    CHECK(f.hub.stats().patches_applied == 0);
    CHECK(f.hub.stats().patch_base_rereads == 1);
    // The doc read is an ordinary one: the next patch applies on it.
    f.hub.receive(kChannel, patch_of(R"([{"op":"replace","path":"/scores/0/score","value":98}])", 0x200, 0x300));
    f.settle();
    CHECK(f.client.docs.back()->envelope == whole(board_swapped(98), 0x300));
    CHECK(f.hub.stats().patches_applied == 1);
    f.hub.unfollow(kChannel, &late);
}

TEST_CASE("gateway patches: a second text at one version in the Inbox, a LocalHub and an Outbox") {
    DocPtr first = make_doc(kChannel, whole(board(95), 0x100));
    DocPtr second = make_doc(kChannel, whole(board_swapped(95), 0x100));
    REQUIRE(other_text(*second, *first));
    CHECK_FALSE(other_text(*make_doc(kChannel, whole(board(95), 0x100)), *first));

    Inbox inbox(1 << 20);  // the later text replaces the queued one; the same text does not
    inbox.put(first);
    inbox.put(make_doc(kChannel, whole(board(95), 0x100)));
    CHECK(inbox.replaced() == 0);
    inbox.put(second);
    auto batch = inbox.take();
    REQUIRE(batch.docs.size() == 1);
    CHECK(batch.docs[0] == second);

    // A LocalHub replaces its held doc with the hub's second text: its new followers get that.
    Fixture f;
    LocalHub local(f.io, f.io, f.hub);
    Recorder near;
    local.follow(kChannel, &near);
    f.settle();
    REQUIRE(near.docs.size() == 1);
    f.hub.receive(kChannel, whole(board_swapped(95), 0x100));
    f.settle();
    REQUIRE(near.docs.size() == 2);
    Recorder joined;
    local.follow(kChannel, &joined);
    REQUIRE(joined.docs.size() == 1);
    CHECK(joined.docs.back()->envelope == whole(board_swapped(95), 0x100));
    local.unfollow(kChannel, &near);
    local.unfollow(kChannel, &joined);
    f.settle();

    // An Outbox: a client that was sent 0/100 is not sent it again (it gets the next version
    // whole); one whose 0/100 still waits gets the second text instead.
    auto retexted = std::make_shared<Doc>(*second);
    retexted->retexted = true;
    Outbox sent;
    sent.add(kChannel, DocVersion{3, 0x100});
    CHECK_FALSE(sent.offer(retexted));
    Outbox waiting;
    waiting.add(kChannel, std::nullopt);
    REQUIRE(waiting.offer(first));
    REQUIRE(waiting.offer(retexted));
    bool patch = true;
    CHECK(waiting.next(&patch) == retexted);
    CHECK_FALSE(patch);
}
