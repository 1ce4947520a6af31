#pragma once
// The worker's lease on its slot: which of the workers started for one slot is the active one.
//
// The lease is a session-level advisory lock on a connection of its own (to --dsn's database),
// keyed by the slot's name: pg_try_advisory_lock(hashtextextended(slot, kActiveSeed)). The active
// worker holds it for as long as it runs. A worker started with --standby polls for it every
// 500 ms and holds, while it waits, a shared advisory lock on the standby key, so the docsync.status
// and docsync.workers views can list it (with its connection's start as "waiting since"). Advisory
// locks held by a session keep no snapshot and no transaction open: waiting for hours costs the
// server one idle connection. When a worker dies, even by kill -9, the server ends its idle session
// on the closed socket and frees the lease at once; a dead host is noticed by TCP keepalives set on
// the session (about 30 s). The replication slot stays the real mutual exclusion (one walsender per
// slot); the lease only decides who may try, so the spare never contends for the slot while the
// active worker is alive, and two workers never both believe they are active for long: the active
// one checks its lease every second and steps down when another worker took it (after its lease
// connection broke). Publishing is safe even then, as every sink keeps the highest version.
//
// Anyone who may connect to the database may take an advisory lock, on any key. A lock on the lease
// key held by a session whose role can neither stream nor read a slot (no REPLICATION, not a
// superuser) is no worker's: such a squatter must not keep every worker waiting. While one holds the
// key, a worker counts as active when the slot is not streamed ("unleased", with a warning naming the
// session and how to end it): the slot alone then keeps a second worker out, as it did before leases
// existed. An unleased worker takes the real lease as soon as the squatter lets it go, and steps down
// only when a worker-capable session holds it. The docsync.workers view lists worker-capable holders
// only.
//
// A hung active worker (stopped by SIGSTOP, stuck in the kernel) keeps its lease session open, so
// its spare would wait for ever. The server ends the hung worker's stream itself once it answers no
// keepalive for wal_sender_timeout; the spare watches the slot, and when no walsender has streamed
// it for a while although the lease stays held, and the holder's lease session has been idle as long
// (a worker alive but failing to stream goes on checking its lease every second), ends that session
// (end_hung_holder()) and takes over. The hung worker, should it wake, finds its lease gone and
// steps down. (How recently the walsender heard from its worker says nothing: a walsender decoding
// from an old restart_lsn processes no replies for as long.)
//
// Thread ownership: one thread at a time (the wiring's lease thread, or main before it starts).

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "pg/connection.hpp"

namespace docsync {

// The advisory lock keys' seeds, shared with the docsync.workers view (sql/parts/11_status.sql).
inline constexpr long long kLeaseActiveSeed = 0x64737761;   // "dswa"
inline constexpr long long kLeaseStandbySeed = 0x64737773;  // "dsws"

struct LeaseOptions {
    std::string dsn;
    std::string slot;
    std::string application_name = "docsync-worker";
    std::chrono::milliseconds connect_timeout{10000};
};

class Lease {
public:
    explicit Lease(LeaseOptions options);

    // Tries once to take the lease (connecting first when needed): true when this worker holds it.
    // Taking it ends the standby registration. Throws docsync::Error (transient) when the server
    // cannot be reached.
    bool try_acquire();
    // Registers this worker as a standby of the slot (idempotent; again after a reconnect).
    void stand_by();
    // Gives the lease back (a spare that could not start): ends the lease session, and with it
    // every lock it held; the next try_acquire() or stand_by() connects again.
    void release();

    enum class State {
        Held,     // this worker holds the lease
        Lost,     // its connection broke and another worker holds the lease now
        Unknown,  // the server cannot be reached: nobody else can take the lease either
    };
    // Whether this worker still holds the lease: a round trip on its connection; after a broken
    // connection, reconnects and takes the lease again when it is free.
    State check();

    // Who holds the lease, for messages: "backend pid 4711 (docsync-worker pid 812 on 10.0.0.7,
    // since 2026-12-01 10:00:00 UTC, role docsync_repl)", or "nobody"; a holder that is no worker
    // is said to be one.
    std::string holder();

    // Whether this worker counts as active without the lease, the key being held by a session that is
    // no worker's (above).
    bool unleased() const { return held_ && unleased_; }

    // Whether a walsender streams the slot now.
    bool slot_streamed() { return !slot_free(); }
    // Seconds since the worker holding the lease last ran a statement on its lease session (the
    // active worker checks its lease every second), by the server's clock; nullopt when no worker
    // holds it or this role may not see the session's state (another role, without pg_read_all_stats).
    std::optional<double> holder_idle();
    // For a spare that found the active worker hung (its process alive, its sessions open, answering
    // nothing, as under SIGSTOP): ends the worker-capable sessions holding the lease and the slot's
    // walsender, so the lease and the slot are free. Returns how many sessions it ended.
    int end_hung_holder();
    // The worker process holding the lease, as its lease session names it ("… active pid N"), on
    // whichever host; nullopt when none does. And the database of --dsn, whose slot it is.
    std::optional<int> holder_process();
    std::string database();

private:
    // One try of the lease key: taken, held by a worker-capable session, or held by a squatter.
    enum class Take { Leased, Worker, Squatted };
    Take take();
    // Whether no walsender streams the slot now (or it does not exist yet).
    bool slot_free();
    // Logs, once per squatting, that the key is held by a session that is no worker's.
    void warn_squatted();
    void connect();
    // Runs a one-row, one-column statement with the slot's name as $1 and returns its value.
    std::string query(const std::string& sql, std::chrono::seconds timeout = std::chrono::seconds(5));
    // application_name of the lease connection: "<name> active pid N" or "<name> standby pid N".
    void set_role(bool active);

    LeaseOptions options_;
    std::unique_ptr<pg::Connection> conn_;
    bool held_ = false;
    bool unleased_ = false;  // held_ while a squatter holds the key: the slot decides
    bool standby_ = false;
};

}  // namespace docsync
