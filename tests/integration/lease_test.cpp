// The slot's lease (replication/lease.hpp) against the real server: one holder at a time, spares
// registered with a shared lock, a holder whose connection was ended either takes the lease again or
// learns that another worker has it.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

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

TEST_CASE("one worker holds a slot's lease, a spare registers as a standby and names the holder") {
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

TEST_CASE("a session of a role that cannot stream, squatting on the lease key, keeps no worker out") {
    auto slot = unique_slot("squat");
    auto admin = Connection::connect("", deadline_in(10s));
    std::string role = "lease_squatter_" + std::to_string(getpid());
    admin.exec_simple("DROP ROLE IF EXISTS " + role + "; CREATE ROLE " + role + " LOGIN", deadline_in(10s));
    auto key = "pg_catalog.hashtextextended($1, " + std::to_string(docsync::kLeaseActiveSeed) + ")";
    {
        auto squatter = Connection::connect("user=" + role, deadline_in(10s));
        squatter.exec("SELECT pg_catalog.pg_advisory_lock(" + key + ")", {slot}, deadline_in(10s));
        std::string squatter_pid = backend_of(admin, slot);
        REQUIRE_FALSE(squatter_pid.empty());

        // Nobody streams the slot: the worker runs without the lease, and says who squats on it.
        Lease worker(options(slot));
        REQUIRE(worker.try_acquire());
        CHECK(worker.unleased());
        CHECK(worker.check() == Lease::State::Held);
        std::string holder = worker.holder();
        CHECK(holder.find("backend pid " + squatter_pid) != std::string::npos);
        CHECK(holder.find("role " + role + ", which is no docsync worker") != std::string::npos);
        CHECK(backend_of(admin, slot) == squatter_pid);  // the squatter's lock, not the worker's

        // A worker-capable session's lease is a worker's: the holder is named plainly.
        Lease other(options(unique_slot("squat_other")));
        REQUIRE(other.try_acquire());
        CHECK_FALSE(other.unleased());
        CHECK(other.holder().find("no docsync worker") == std::string::npos);

        // The squatter leaves: the unleased worker takes the real lease at its next check.
        squatter.exec("SELECT pg_catalog.pg_advisory_unlock(" + key + ")", {slot}, deadline_in(10s));
        CHECK(worker.check() == Lease::State::Held);
        CHECK_FALSE(worker.unleased());
        std::string now = backend_of(admin, slot);
        CHECK_FALSE(now.empty());
        CHECK(now != squatter_pid);
    }
    {
        // Squatted again, and then a worker takes the freed key before the unleased one looks: the
        // unleased one learns it lost, and steps down.
        auto squatter = Connection::connect("user=" + role, deadline_in(10s));
        squatter.exec("SELECT pg_catalog.pg_advisory_lock(" + key + ")", {slot + "_2"}, deadline_in(10s));
        Lease unleased(options(slot + "_2")), real(options(slot + "_2"));
        REQUIRE(unleased.try_acquire());
        CHECK(unleased.unleased());
        squatter.exec("SELECT pg_catalog.pg_advisory_unlock(" + key + ")", {slot + "_2"}, deadline_in(10s));
        REQUIRE(real.try_acquire());
        CHECK_FALSE(real.unleased());
        CHECK(unleased.check() == Lease::State::Lost);
        CHECK_FALSE(unleased.unleased());
    }
    admin.exec_simple("DROP ROLE " + role, deadline_in(10s));
}

TEST_CASE("a spare ends a hung holder's lease session, a slot nobody streams has no silence to measure") {
    auto slot = unique_slot("hung");
    auto admin = Connection::connect("", deadline_in(10s));
    Lease hung(options(slot)), spare(options(slot));
    REQUIRE(hung.try_acquire());
    CHECK_FALSE(spare.try_acquire());
    CHECK_FALSE(spare.slot_streamed());  // the slot does not exist: no walsender streams it
    std::string before = backend_of(admin, slot);
    CHECK(spare.end_hung_holder() == 1);  // its lease session (no walsender to end)
    CHECK(backend_of(admin, slot).empty());
    REQUIRE(spare.try_acquire());
    CHECK(hung.check() == Lease::State::Lost);  // woken, the hung one learns it lost the lease
}

TEST_CASE("the lease names its holder's process and database") {
    auto slot = unique_slot("process");
    Lease active(options(slot)), spare(options(slot));
    CHECK_FALSE(spare.holder_process());
    REQUIRE(active.try_acquire());
    CHECK(spare.holder_process() == std::optional<int>(getpid()));
    auto admin = Connection::connect("", deadline_in(10s));
    CHECK(spare.database() == std::string(admin.exec("SELECT current_database()", deadline_in(10s)).get(0, 0)));
}

TEST_CASE("a spare sees how long the holder's lease session has been idle") {
    auto slot = unique_slot("idle");
    Lease active(options(slot)), spare(options(slot));
    CHECK_FALSE(spare.holder_idle());  // nobody holds it
    REQUIRE(active.try_acquire());
    std::this_thread::sleep_for(1200ms);
    auto idle = spare.holder_idle();
    REQUIRE(idle);
    CHECK(*idle >= 1.0);
    CHECK(active.check() == Lease::State::Held);  // a live worker checks its lease: idle again from 0
    idle = spare.holder_idle();
    REQUIRE(idle);
    CHECK(*idle < 1.0);
}
