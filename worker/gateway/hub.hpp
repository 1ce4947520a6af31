#pragma once
// The channels the gateway's clients follow, with each one's newest doc. The Hub lives on the hub's
// thread (every call to it is made there; the feed's callbacks are posted onto it); each I/O thread
// has a LocalHub, where its connections follow channels: it follows each channel once at the Hub and
// hands every doc it gets to its own followers, so that a doc crosses threads once per I/O thread,
// not once per client.
//
// A channel's first follower subscribes it on Redis; once the subscription is in place the hub reads
// the retained doc (subscribe first, then read: nothing published between the two is missed) and
// announces the subscriber with the liveness protocol: PUBLISH docsync:touch, or docsync:warm when
// Redis holds no doc, so that the worker computes it. `--live subscribers` counts the gateway's
// subscription like any other. The last follower leaving unsubscribes.
//
// A doc is offered to the followers only when its version is above the newest one the hub holds for
// the channel, so a late read or a replayed message never moves a channel back; or, at an equal
// version, when its doc text differs from the one held (then marked `retexted`, see Doc). After a
// Redis outage every channel is subscribed and read again, so no channel ends on an old doc.

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <unordered_map>
#include <unordered_set>

#include "common/lsn.hpp"
#include "gateway/feed_port.hpp"
#include "patch/json_patch.hpp"

namespace docsync::gateway {

// One version of one channel's doc, shared by every client it goes to (never copied per client).
struct Doc {
    std::string channel;
    DocVersion version;
    std::string version_text;  // "G/X/Y": an SSE id, an ETag, the WebSocket message's "version"
    std::string envelope;      // as Redis holds it
    bool tombstone = false;    // "doc":null: the worker computed it and found no row
    std::string ws_message;    // {"type":"doc","version":"G/X/Y",<the envelope's fields>}
    std::string sse_head;      // "event: doc\nid: G/X/Y\ndata: ": a one-channel stream's event head
    // The envelope as the data lines of one SSE event when it holds line breaks (each CR, LF or
    // CRLF, JSON whitespace, becomes "\ndata: "); empty when the envelope is one line already.
    std::string sse_lines;
    const std::string& sse_data() const { return sse_lines.empty() ? envelope : sse_lines; }
    std::size_t doc_at = 0, doc_size = 0;  // where the doc's JSON text lies in the envelope
    std::string_view doc_text() const { return std::string_view(envelope).substr(doc_at, doc_size); }
    // Redis published a second, different text at this version (two computes of one version; the
    // script SETs on an equal version): this doc is the newer-received text, the one the key holds,
    // and a version can no longer name the text a patch was made from. No patch is applied on it
    // (a patch with this base reads the key: whole docs), and it replaces an equal version held.
    bool retexted = false;

    // A version that came from Redis as a patch (docs/patches.md) keeps it for the clients that
    // hold its base (Outbox::next decides per client); all of these are empty otherwise.
    std::optional<DocVersion> base;
    std::string patch_envelope;    // as Redis sent it
    std::string patch_ws_message;  // {"type":"patch","version":"G/X/Y","base":"G/X/Y",<its fields>}
    std::string patch_sse_head;    // "event: patch\nid: G/X/Y\ndata: "
    std::string patch_sse_lines;   // as sse_lines, for the patch envelope
    const std::string& patch_sse_data() const { return patch_sse_lines.empty() ? patch_envelope : patch_sse_lines; }
    // Received and not applied yet (from Hub::receive to the hub's thread, in the Inbox): the
    // whole forms above are empty, and the patch is patch_envelope's [patch_at, patch_at + patch_size).
    bool patch_only = false;
    patch::Form patch_form = patch::Form::JsonPatch;
    std::size_t patch_at = 0, patch_size = 0;

    // What a doc costs a queue (Inbox's bound).
    std::size_t bytes() const { return envelope.size() + patch_envelope.size(); }
};
using DocPtr = std::shared_ptr<const Doc>;

// "G/X/Y" and back.
std::string format_version(DocVersion version);
std::optional<DocVersion> parse_version(std::string_view text);
// Whether `doc` at the same version as `held` is another text of it (both whole docs): Redis
// published two computes of one version, and the later (`doc`) is what the key holds.
bool other_text(const Doc& doc, const Doc& held);
// The Doc of an envelope read or received for `channel`; nullptr when it is not one (logged).
DocPtr make_doc(const std::string& channel, std::string envelope);
// Sets the whole doc's forms of `doc` (its channel, version and version_text set) from its
// envelope, whose doc text is [doc_at, doc_at + doc_size): make_doc's and apply_patch's shared half.
void set_doc_forms(Doc& doc, std::string envelope, std::size_t doc_at, std::size_t doc_size);
// `text` as the data lines of one SSE event ("\ndata: " for each line break), or "" when it
// holds none.
std::string sse_data_lines(std::string_view text);

class Follower {
public:
    virtual ~Follower() = default;
    // A newer doc of a followed channel.
    virtual void on_doc(const DocPtr& doc) = 0;
    // Something the client should know about a followed channel that stays followed (a limit
    // that defers it): an error code and a message naming the setting.
    virtual void on_notice(const std::string& /*channel*/, const std::string& /*code*/,
                           const std::string& /*message*/) {}
};

struct HubStats {
    std::size_t channels = 0;   // followed channels
    std::size_t followers = 0;  // (client, channel) pairs
    std::uint64_t messages = 0; // docs received from Redis
    std::uint64_t stale = 0;    // docs received at or below the version held, not offered
    std::uint64_t replaced = 0;     // docs queued from Redis replaced by a newer one of their channel
    std::uint64_t overflowed = 0;   // docs not queued past --max-queued-bytes (their channel read again)
    std::size_t missing = 0;        // channels subscribed on Redis without a doc there (see Hub)
    std::size_t deferred = 0;       // followed channels left unsubscribed for now (see Hub)
    std::uint64_t warms_dropped = 0;  // warm requests and subscriptions deferred by --warm-rate or --max-missing-docs
    // Patch messages (docs/patches.md): received, applied to the held doc, answered by reading the
    // key again because the hub did not hold their base (a missed or replaced message), and
    // refused (malformed, or the patch did not apply; the key is read again for those too).
    std::uint64_t patches_received = 0;
    std::uint64_t patches_applied = 0;
    std::uint64_t patch_base_rereads = 0;
    std::uint64_t patches_refused = 0;
};

// The docs received from Redis and not yet taken by the hub's thread: at most one per channel, the
// newest, and at most `max_bytes` of envelopes; a doc past that is not kept, and its channel is
// read from Redis again instead (the retained doc is at least as new). Thread-safe.
class Inbox {
public:
    explicit Inbox(std::size_t max_bytes) : max_bytes_(max_bytes) {}
    // Queues `doc`; true when the queue was empty (the taker must be woken). It replaces its
    // channel's queued doc when newer, or at an equal version when both are whole docs whose texts
    // differ (the later one is what Redis holds).
    bool put(DocPtr doc);
    // Queues a read of `channel`'s key instead of a doc (a message that could not be used); as put.
    bool reread(const std::string& channel);
    struct Batch {
        std::vector<DocPtr> docs;           // oldest first
        std::vector<std::string> reread;    // channels whose doc did not fit
    };
    Batch take();
    std::uint64_t replaced() const;
    std::uint64_t overflowed() const;

private:
    const std::size_t max_bytes_;
    mutable std::mutex mutex_;
    std::vector<DocPtr> docs_;                          // guarded by mutex_
    std::unordered_map<std::string, std::size_t> at_;  // channel → index in docs_ (guarded)
    std::unordered_set<std::string> reread_;            // guarded by mutex_
    std::size_t bytes_ = 0;                             // guarded by mutex_
    std::uint64_t replaced_ = 0, overflowed_ = 0;       // guarded by mutex_
};

class Hub {
public:
    // `warm_rate`: docsync:warm requests per second at most (see warm); `max_queued_bytes`: the
    // Inbox's bound; `max_missing`: channels subscribed without a doc in Redis at once, at most.
    Hub(boost::asio::io_context& io, FeedPort& feed, unsigned warm_rate = 100,
        std::size_t max_queued_bytes = 64 * 1024 * 1024, std::size_t max_missing = 1000);

    // `follower` follows `channel`; gets the channel's newest doc at once when the hub holds one.
    void follow(const std::string& channel, Follower* follower);
    void unfollow(const std::string& channel, Follower* follower);

    // The retained doc of `channel` read from Redis (for GET /v1/docs), on the I/O thread: the doc,
    // nullptr when Redis holds none (the worker is then asked for it), or an error text.
    void read(const std::string& channel, std::function<void(DocPtr, std::string error)> done);

    bool redis_up() const { return feed_.up(); }
    // Whether Redis answers now: a PING's round trip to every node the gateway depends on (each
    // master of a cluster), with the subscriber connected. `done(up, why)` runs on the hub's
    // thread within `timeout` (down, naming the nodes that did not answer, when one did not);
    // requests made while a probe is out share its answer, so a frozen Redis never piles up PINGs.
    void health(std::chrono::milliseconds timeout, std::function<void(bool up, std::string why)> done);
    // Readable from any thread.
    HubStats stats() const;
    // (client, channel) pairs across the LocalHubs, kept by them.
    std::atomic<std::size_t> client_followers{0};

    // A message on a followed channel, on the feed's subscriber thread: parsed there (a slow
    // parse slows the reading of Redis, whose own output-buffer limit then applies) and queued in
    // the Inbox for the hub's thread.
    void receive(const std::string& channel, std::string payload);
    // Posted from the feed's threads.
    void on_subscribed(const std::string& channel);

private:
    // Where a followed channel stands with Redis. A subscription counts for `--live subscribers`:
    // the worker computes and keeps live every channel the gateway subscribes. So a channel is
    // read before it is subscribed; one whose doc Redis does not hold is subscribed (and the
    // worker asked for it) only within --warm-rate per second and --max-missing-docs at once, and
    // waits unsubscribed (deferred, its followers told) otherwise, tried again each second.
    enum class Sub { Probing, Subscribed, Deferred };
    struct Channel {
        std::unordered_set<Follower*> followers;
        DocPtr latest;
        std::uint64_t reads = 0;  // reads started for this channel: a later one supersedes
        Sub sub = Sub::Probing;
        bool told = false;  // its followers were told it is deferred
        bool patch_warned = false;  // a refused patch of this channel was logged
        // A read of the key for a message the hub could not use is out (see reread), and the
        // newest version such a message named while it was out: a read that comes back older is
        // made once more.
        bool rereading = false;
        std::optional<DocVersion> reread_for;
        // A re-read was asked for while one was out, for a message of no known version (one the
        // Inbox could not keep, a malformed patch): the read out may have run before that message's
        // doc was written, so the key is read once more when it answers, whatever it holds.
        bool reread_again = false;
    };
    void offer(Channel& state, const DocPtr& doc);
    // The whole doc a received patch makes of the channel's latest, or nullptr when the hub does
    // not hold its base or it does not apply: the key is then read again (a whole doc).
    DocPtr apply_received(const std::string& channel, Channel& state, const DocPtr& patch);
    // Reads a subscribed channel's key again for a message it could not use, of version `wanted`
    // when known (a probing or deferred channel is read anyway). One read at a time: messages
    // failing faster than reads come back only raise `reread_for`, so reads are never superseded
    // one after another without end (the channel would then stand still under a steady stream).
    void reread(const std::string& channel, Channel& state, std::optional<DocVersion> wanted = std::nullopt);
    // Logs a refused patch message: once per channel, and at most one line a second.
    void warn_patch(const std::string& channel, Channel* state, const std::string& why);
    // The read before subscribing, and what follows from it.
    void probe(const std::string& channel);
    void admit(const std::string& channel, Channel& state);
    // Leaves `channel` followed but unsubscribed, read again in turn each second; `tell`: its
    // followers get a `deferred` notice (once).
    void defer(const std::string& channel, Channel& state, bool tell);
    void subscribe(const std::string& channel, Channel& state);
    void retry_deferred();
    // Takes one warm request from the --warm-rate budget; false (counted, logged now and then)
    // when none is left this second.
    bool take_warm_token();
    // Takes what the Inbox holds (the hub's thread).
    void drain();
    // `announce`: PUBLISH docsync:touch once read (not for a re-read after an Inbox overflow).
    void read_retained(const std::string& channel, bool announce = true);
    // Asks the worker for a doc Redis does not hold (docsync:warm), unless this channel was asked
    // for in the last 10 s or --warm-rate requests went out in the last second (a burst of as many
    // is allowed): clients naming channels that do not exist cannot make the worker run doc
    // queries at their pace. A doc not asked for now comes with the worker's next poll of the
    // subscribers (--live subscribers) or its next change.
    void warm(const std::string& channel);

    struct HealthWaiter {
        std::function<void(bool, std::string)> done;
        bool answered = false;
    };
    void answer_health(bool up, const std::string& why);

    boost::asio::io_context& io_;
    FeedPort& feed_;
    std::vector<std::shared_ptr<HealthWaiter>> health_waiters_;
    bool probing_ = false;  // a PING is out
    std::unordered_map<std::string, Channel> channels_;
    std::atomic<std::size_t> channel_count_{0};
    const double warm_rate_;
    double warm_tokens_;
    std::chrono::steady_clock::time_point warm_refilled_;
    std::unordered_map<std::string, std::chrono::steady_clock::time_point> warmed_;  // channel → when
    std::atomic<std::uint64_t> warms_dropped_{0};
    const std::size_t max_missing_;
    std::unordered_set<std::string> missing_;   // subscribed; Redis held no doc (or a tombstone since)
    std::unordered_set<std::string> deferred_;  // followed, not subscribed: over the budget for now
    std::deque<std::string> deferred_order_;    // deferred_, oldest first: retried in turn
    std::atomic<std::size_t> missing_count_{0}, deferred_count_{0};
    bool retry_scheduled_ = false;
    std::chrono::steady_clock::time_point warm_reported_{};
    std::atomic<std::uint64_t> messages_{0};
    std::atomic<std::uint64_t> stale_{0};
    std::atomic<std::uint64_t> patches_received_{0}, patches_applied_{0}, patch_base_rereads_{0}, patches_refused_{0};
    std::mutex patch_warning_mutex_;  // receive() warns on the subscriber's thread, drain() on the hub's
    std::chrono::steady_clock::time_point patch_warned_at_{};
    Inbox inbox_;
};

// An I/O thread's side of the Hub; every call is made on that thread, but on_doc, which the Hub
// makes on its own.
class LocalHub : public Follower {
public:
    LocalHub(boost::asio::io_context& io, boost::asio::io_context& hub_io, Hub& hub);

    // As Hub::follow and Hub::unfollow.
    void follow(const std::string& channel, Follower* follower);
    void unfollow(const std::string& channel, Follower* follower);
    // Whether `follower` follows any channel here (a check for debug builds: linear in channels).
    bool holds(const Follower* follower) const;
    // As Hub::read; `done` runs on this thread.
    void read(const std::string& channel, std::function<void(DocPtr, std::string error)> done);
    bool redis_up() const { return hub_.redis_up(); }
    // As Hub::health; `done` runs on this thread.
    void health(std::chrono::milliseconds timeout, std::function<void(bool up, std::string why)> done);
    HubStats stats() const { return hub_.stats(); }

    // A newer doc of a channel this thread follows, from the Hub's thread.
    void on_doc(const DocPtr& doc) override;
    // Passed on to this thread's followers of `channel`, from the Hub's thread.
    void on_notice(const std::string& channel, const std::string& code, const std::string& message) override;

private:
    struct Channel {
        std::unordered_set<Follower*> followers;
        DocPtr latest;
    };
    void deliver(const DocPtr& doc);

    boost::asio::io_context& io_;
    boost::asio::io_context& hub_io_;
    Hub& hub_;
    std::unordered_map<std::string, Channel> channels_;
    // Docs handed over by the Hub and not yet delivered: one per channel this thread follows, so
    // a busy thread never queues more than that (no byte bound needed).
    Inbox arrived_{static_cast<std::size_t>(-1)};
};

}  // namespace docsync::gateway
