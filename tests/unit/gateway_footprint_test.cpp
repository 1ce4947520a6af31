// What an idle stream holds in the gateway (docs/gateway.md, "Memory per idle stream"): no
// buffer of the outbox's queue or of the reply queue once they are empty, and per-connection
// objects no larger than their budget.
#include <doctest/doctest.h>

#include <cstdint>

#include "gateway/delivery.hpp"
#include "gateway/session.hpp"

using namespace docsync;
using namespace docsync::gateway;

namespace {

DocPtr doc(const std::string& channel, std::uint64_t lsn) {
    return make_doc(channel, "{\"channel\":\"" + channel + "\",\"doc\":{\"n\":" + std::to_string(lsn) +
                                 "},\"generation\":1,\"lsn\":\"" + format_lsn(lsn) + "\"}");
}

}  // namespace

TEST_CASE("gateway footprint: the outbox's queue holds a buffer only while a doc waits") {
    Outbox box;
    box.add("db:a", std::nullopt);
    box.add("db:b", std::nullopt);
    CHECK_FALSE(box.holds_queue());
    REQUIRE(box.offer(doc("db:a", 0x10)));
    REQUIRE(box.offer(doc("db:b", 0x10)));
    CHECK(box.holds_queue());
    REQUIRE(box.next());
    CHECK(box.holds_queue());  // db:b still waits
    REQUIRE(box.next());
    CHECK_FALSE(box.holds_queue());  // sent: the stream is idle again
    CHECK_FALSE(box.next());

    // Every other way a queue empties gives its buffer back too.
    REQUIRE(box.offer(doc("db:a", 0x20)));
    box.raise_floor(*box.find("db:a"), DocVersion{1, 0x30});
    CHECK_FALSE(box.holds_queue());
    REQUIRE(box.offer(doc("db:b", 0x20)));
    box.remove("db:b");
    CHECK_FALSE(box.holds_queue());
    REQUIRE(box.offer(doc("db:a", 0x40)));
    box.clear();
    CHECK_FALSE(box.holds_queue());
}

TEST_CASE("gateway footprint: taking the last reply frees the reply queue's buffer") {
    ControlQueue queue;
    queue.push_back("retry: 1000\n\n");
    queue.push_back(": ping\n\n");
    CHECK(pop_front(queue) == "retry: 1000\n\n");
    CHECK(queue.capacity() != 0);  // one still waits
    CHECK(pop_front(queue) == ": ping\n\n");
    CHECK(queue.empty());
    CHECK(queue.capacity() == 0);
}

TEST_CASE("gateway footprint: the per-connection objects keep to their budget") {
    // The budget of docs/gateway.md, for the LP64 libstdc++ build it was measured on (other
    // ABIs lay the objects out otherwise). An SSE stream is a Delivery with its socket, its
    // token's expiry and two bytes of reading (sse.cpp checks that sum at compile time).
#if defined(__GLIBCXX__) && UINTPTR_MAX == UINT64_MAX
    CHECK(sizeof(Connection) <= 24);  // vtable, shard, seat: no overflow-seat record
    CHECK(sizeof(Delivery) <= 192);   // no kind string, one text buffer shared by replies and heads
    CHECK(sizeof(Socket) <= 48);      // bound to the shard's io_context, not a type-erased executor
#else
    MESSAGE("per-connection budgets are checked on LP64 libstdc++ builds only");
#endif
}
