#pragma once
// The retain + publish script, shared by the single-node sink (publish/redis_sink.hpp) and the
// cluster sink (publish/redis_cluster_sink.hpp), and what the sinks make of its replies.
//
// KEYS[1] the doc's key, which is also its channel; on a single node KEYS[2] docsync:max_generation
// and KEYS[3] docsync:max_version.
// ARGV[1] the envelope, ARGV[2] generation (decimal), ARGV[3] / ARGV[4] the LSN's high and low 32 bits
// (hex), ARGV[5] the TTL in ms for a tombstone, 0 for a doc; with a patch (docs/patches.md) also
// ARGV[6] the patch envelope and ARGV[7] / ARGV[8] / ARGV[9] its base's generation and LSN halves
// (absent without one, so a whole doc's call stays as short as before).
// Versions compare as (generation, lsn high, lsn low): every part fits a Lua number exactly. The
// retained version is read from the envelope's tail only (GETRANGE), never the whole doc.
// The key is always SET to the whole envelope; the message is the patch envelope only when the key
// retained exactly the patch's base, so a subscriber that saw the previous message holds the base.
// Returns 2 when the doc was retained and its patch published, 1 when the doc was retained and
// published whole over an older version, 3 when it was retained and published whole at a version
// equal to the one retained, or where the key held no version (a doc computed again with maybe
// another text, or a key lost — flushed, expired — whose readers may still hold a text at this
// version: they keep theirs, so the patcher takes it as a base only when it knows every text
// published at it; no patch is ever published then), 0 when a newer version was already retained
// (nothing written).
//
// The single-node script also raises docsync:max_generation and docsync:max_version (the highest
// version ever retained, GENERATION/HI/LO with the LSN's halves in hex) and PUBLISHes. The cluster script
// touches one key (a script's keys must share a slot) and SPUBLISHes on the key's own slot: the
// cluster sink raises docsync:max_generation itself, before it publishes a doc of a new generation.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "engine/seams.hpp"
#include "publish/patcher.hpp"
#include "redis/connection.hpp"
#include "redis/keys.hpp"

namespace docsync::publish {

inline constexpr std::string_view kMaxGenerationKey = "docsync:max_generation";
// Gives KEYS[1] an expiry of ARGV[1] ms unless it has one (Publisher::expire_orphans).
inline constexpr std::string_view kExpireOrphanScript =
    "if redis.call('PTTL', KEYS[1]) == -1 then return redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return 0";
// The highest version the sink holds (raised by the doc script), compared with the server at start.
inline constexpr std::string_view kMaxVersionKey = "docsync:max_version";

enum class ScriptKind { Single, Cluster };
const char* doc_script(ScriptKind kind);

// The arguments of one doc's script call.
struct ScriptCall {
    std::string key;
    std::string envelope;
    std::string generation;
    std::string hi;
    std::string lo;
    std::string ttl;
    // With a patch: its envelope and its base's version, as ARGV[6..9]; empty without one.
    std::string patch;
    std::string base_generation;
    std::string base_hi;
    std::string base_lo;
    void add_patch(std::string patch_envelope, DocVersion base);
    // EVALSHA (or, with `script`, EVAL) of the single-node or the cluster script.
    std::vector<std::string_view> args(ScriptKind kind, std::string_view sha_or_script, bool script) const;
};

ScriptCall script_call(std::string key, const std::string& channel, const std::optional<std::string>& doc,
                       DocVersion version, std::chrono::seconds tombstone_ttl);

// The call for a planned doc (publish/patcher.hpp): the whole envelope, and the patch when there is
// one. Takes the plan's envelopes (the plan keeps its texts and sizes for record()).
ScriptCall script_call(std::string key, PatchPlan&& plan, std::chrono::seconds tombstone_ttl, bool tombstone);

// What a taken script reply (judge_script_reply found no error) says became of the doc: 2 the patch
// went out, 1 the whole doc, 3 the whole doc at the version held, 0 stale; nullopt for a reply that
// is no integer.
std::optional<PatchOutcome> script_outcome(const Reply& reply);

bool no_script(const Reply& reply);

// The error of a script's reply for `channel`'s doc (`where`: the server, for the message), or
// nullopt when it was taken. A doc key of another type is a setup problem no retry fixes (permanent);
// any other error reply (LOADING, READONLY on a demoted primary, OOM, BUSY, CLUSTERDOWN) clears up
// when Redis does.
std::optional<Error> judge_script_reply(const Reply& reply, const std::string& where, const std::string& channel);

// One field of an INFO reply (`run_id`, `master_replid`), empty when it has none.
std::string info_field(const Reply& info, std::string_view field);

// The marker docsync:epoch (or docsync:epoch:{N} on a cluster's master) holds TOKEN/MASTER_REPLID:
// a new token tells a flushed Redis, another replication ID a restart or a promotion, also to a
// worker that was not running then. check_epoch_marker reads the marker at `key` through `command`,
// writes a fresh one when it is missing (NX: with several workers the first one's stays), and writes
// `replid` into it when it names another (which `other_history` then reports once). An empty token:
// the key holds something else (set by hand), which tells nothing.
struct EpochMarker {
    std::string token;
    std::string replid;       // the marker's, before it was rewritten; empty in a marker without one
    bool other_history = false;
    bool created = false;     // the key was missing: this call wrote it
};
EpochMarker check_epoch_marker(const std::function<Reply(const std::vector<std::string_view>&)>& command,
                               const std::string& key, const std::string& replid);

}  // namespace docsync::publish
