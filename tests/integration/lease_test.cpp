// The slot's lease (replication/lease.hpp) against the real server: one holder at a time, spares
// registered with a shared lock, a holder whose connection was ended either takes the lease again or
// learns that another worker has it.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <string>

#include "pg/connection.hpp"
#include "replication/lease.hpp"

using namespace std::chrono_literals;
using docsync::Lease;
using docsync::LeaseOptions;
using docsync::pg::Connection;
using docsync::pg::deadline_in;

namespace {

LeaseOptions options(const std::string& slot) {
    LeaseOptions o;
    o.slot = slot;  // the lease needs no slot: only its name
    return o;
}

std::string unique_slot(const char* what) { return std::string("lease_") + what + "_" + std::to_string(getpid()); }

// The backend pids holding `slot`'s lease key in `mode` (ExclusiveLock: active, ShareLock: standby),
// as the docsync.workers view finds them.
std::string lock_holders(Connection& c, const std::string& slot, const char* mode) {
    bool active = std::string(mode) == "ExclusiveLock";
    auto r = c.exec(
        "SELECT coalesce(string_agg(l.pid::text, ',' ORDER BY l.pid), '') FROM pg_locks l, "
        "(SELECT hashtextextended($1, $2::bigint) AS k) k "
        "WHERE l.locktype = 'advisory' AND l.granted AND l.mode = $3 AND l.objsubid = 1 "
        "AND l.classid = ((k.k >> 32) & 4294967295)::oid AND l.objid = (k.k & 4294967295)::oid",
        {slot, std::to_string(active ? docsync::kLeaseActiveSeed : docsync::kLeaseStandbySeed), std::string(mode)},
        deadline_in(10s));
    return std::string(r.get(0, 0));
}

std::string backend_of(Connection& c, const std::string& slot) {
    return lock_holders(c, slot, "ExclusiveLock");
}

void terminate(Connection& c, const std::string& pid) {
    c.exec("SELECT pg_terminate_backend($1::int, 5000)", {pid}, deadline_in(10s));
}

}  // namespace

TEST_CASE("one worker holds a slot's lease; a spare registers as a standby and names the holder") {
    auto slot = unique_slot("one");
    auto admin = Connection::connect("", deadline_in(10s));
    Lease active(options(slot)), spare(options(slot));
    REQUIRE(active.try_acquire());
    CHECK(active.try_acquire());  // held: no second lock taken
    CHECK_FALSE(spare.try_acquire());
    spare.stand_by();
    spare.stand_by();  // idempotent

    std::string holder_pid = backend_of(admin, slot);
    REQUIRE_FALSE(holder_pid.empty());
    CHECK(holder_pid.find(',') == std::string::npos);
    CHECK(lock_holders(admin, slot, "ShareLock").size() > 0);
    std::string holder = spare.holder();
    CHECK(holder.find("backend pid " + holder_pid) != std::string::npos);
    CHECK(holder.find("active pid " + std::to_string(getpid())) != std::string::npos);
    CHECK(active.check() == Lease::State::Held);

    // Another slot's lease is another key.
    Lease other(options(unique_slot("other")));
    CHECK(other.try_acquire());
}

TEST_CASE("when the holder's connection ends, the spare takes the lease and the holder learns it lost it") {
    auto slot = unique_slot("lost");
    auto admin = Connection::connect("", deadline_in(10s));
    Lease active(options(slot)), spare(options(slot));
    REQUIRE(active.try_acquire());
    CHECK_FALSE(spare.try_acquire());
    spare.stand_by();
    terminate(admin, backend_of(admin, slot));
    REQUIRE(spare.try_acquire());
    CHECK(lock_holders(admin, slot, "ShareLock").empty());  // the spare's standby registration ended
    CHECK(active.check() == Lease::State::Lost);
    CHECK(spare.check() == Lease::State::Held);
    CHECK(active.holder().find("backend pid " + backend_of(admin, slot)) != std::string::npos);
}

TEST_CASE("a holder whose connection ended takes its lease again when no spare took it") {
    auto slot = unique_slot("again");
    auto admin = Connection::connect("", deadline_in(10s));
    Lease active(options(slot));
    REQUIRE(active.try_acquire());
    std::string before = backend_of(admin, slot);
    terminate(admin, before);
    CHECK(active.check() == Lease::State::Held);
    std::string after = backend_of(admin, slot);
    CHECK_FALSE(after.empty());
    CHECK(after != before);
}

TEST_CASE("an unreachable server leaves the lease's state unknown, not lost") {
    LeaseOptions o = options(unique_slot("unreachable"));
    o.dsn = "host=127.0.0.1 port=1 connect_timeout=2";
    Lease lease(o);
    CHECK_THROWS_AS(lease.try_acquire(), docsync::Error);
    CHECK(lease.check() == Lease::State::Unknown);
    CHECK(lease.holder().find("unknown") != std::string::npos);
}
