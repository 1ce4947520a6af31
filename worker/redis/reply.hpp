#pragma once
// What the Redis client hands back: a reply (owned), what kind of reply it is, and the client's
// failures, each made by a factory named for what went wrong, which also decides whether a retry
// may succeed (transient) or the address or the server must be fixed first (permanent).

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace docsync::redis {

struct ReplyFree {
    void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

// A reply's kind, by hiredis's type. RESP3-only kinds (double, map, set, …) are Other: the client
// speaks RESP2.
enum class ReplyKind { Missing, Status, Error, String, Integer, Nil, Array, Other };
ReplyKind kind_of(const redisReply* reply);
inline ReplyKind kind_of(const Reply& reply) { return kind_of(reply.get()); }

// Whether `reply` is an error reply, and, given a `code`, whether its first word is that code
// ("NOSCRIPT", "MOVED", "NOAUTH", "ERR", …).
bool is_error(const redisReply* reply, std::string_view code = {});
inline bool is_error(const Reply& reply, std::string_view code = {}) { return is_error(reply.get(), code); }

// The text of an error, status or string reply, for messages; other kinds are named.
std::string reply_text(const redisReply* reply);

// The server could not be reached, or did not answer in time, or the connection broke: transient,
// the operation is retried.
Error unreachable(const std::string& message);
// The server answered, but not as the operation needs (a refused AUTH or SELECT, too few replicas
// acknowledging a WAIT, a slot no master serves): transient, the operation is retried.
Error refused(const std::string& message);
// The address or the server's setup is wrong (a single Redis given as a cluster, a password needed
// and none given, a malformed URL): permanent, retrying cannot help until it is fixed.
Error misconfigured(const std::string& message);

}  // namespace docsync::redis
