// Reply kinds and the client's failures.
#include "redis/reply.hpp"

namespace docsync::redis {

ReplyKind kind_of(const redisReply* reply) {
    if (reply == nullptr) return ReplyKind::Missing;
    switch (reply->type) {
        case REDIS_REPLY_STATUS: return ReplyKind::Status;
        case REDIS_REPLY_ERROR: return ReplyKind::Error;
        case REDIS_REPLY_STRING: return ReplyKind::String;
        case REDIS_REPLY_INTEGER: return ReplyKind::Integer;
        case REDIS_REPLY_NIL: return ReplyKind::Nil;
        case REDIS_REPLY_ARRAY: return ReplyKind::Array;
        default: return ReplyKind::Other;
    }
}

bool is_error(const redisReply* reply, std::string_view code) {
    if (kind_of(reply) != ReplyKind::Error) return false;
    if (code.empty()) return true;
    std::string_view text(reply->str, reply->len);
    return text.substr(0, code.size()) == code && (text.size() == code.size() || text[code.size()] == ' ');
}

std::string reply_text(const redisReply* reply) {
    switch (kind_of(reply)) {
        case ReplyKind::Missing: return "no reply";
        case ReplyKind::Status:
        case ReplyKind::Error:
        case ReplyKind::String: return std::string(reply->str, reply->len);
        default: return "reply of type " + std::to_string(reply->type);
    }
}

Error unreachable(const std::string& message) { return Error(message, {}, true); }

Error refused(const std::string& message) { return Error(message, {}, true); }

Error misconfigured(const std::string& message) { return Error(message, {}, false); }

}  // namespace docsync::redis
