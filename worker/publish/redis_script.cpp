// The retain + publish script and its replies.
#include "publish/redis_script.hpp"

#include <cstdio>
#include <random>

#include "envelope/envelope.hpp"

namespace docsync::publish {

namespace {

#define DOCSYNC_SCRIPT_HEAD                                                                   \
    "local kind = redis.call('TYPE', KEYS[1]).ok\n"                                           \
    "if kind ~= 'none' and kind ~= 'string' then\n"                                           \
    "  return redis.error_reply('DOCSYNC key ' .. KEYS[1] .. ' holds a ' .. kind ..\n"        \
    "    ', not a docsync doc: the db: keys belong to docsync')\n"                            \
    "end\n"                                                                                   \
    "local new = {tonumber(ARGV[2]), tonumber(ARGV[3], 16), tonumber(ARGV[4], 16)}\n"         \
    "local held, equal = nil, false\n"                                                        \
    "if kind == 'string' then\n"                                                              \
    "  local tail = redis.call('GETRANGE', KEYS[1], -100, -1)\n"                              \
    "  local g, h, l = string.match(tail, '\"generation\":(%d+),\"lsn\":\"(%x+)/(%x+)\"}$')\n" \
    "  if g then\n"                                                                           \
    "    local old = {tonumber(g), tonumber(h, 16), tonumber(l, 16)}\n"                       \
    "    held = old\n"                                                                        \
    "    equal = true\n"                                                                      \
    "    for i = 1, 3 do\n"                                                                   \
    "      if new[i] > old[i] then equal = false break end\n"                                 \
    "      if new[i] < old[i] then return 0 end\n"                                            \
    "    end\n"                                                                               \
    "  end\n"                                                                                 \
    "end\n"                                                                                   \
    "if ARGV[5] == '0' then\n"                                                                \
    "  redis.call('SET', KEYS[1], ARGV[1])\n"                                                 \
    "else\n"                                                                                  \
    "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[5])\n"                                  \
    "end\n"                                                                                   \
    "local message, sent = ARGV[1], 1\n"                                                      \
    "if equal or not held then sent = 3 end\n"                                               \
    "if ARGV[6] and not equal and held and tonumber(ARGV[7]) == held[1] and tonumber(ARGV[8], 16) == held[2]\n" \
    "    and tonumber(ARGV[9], 16) == held[3] then\n"                                         \
    "  message, sent = ARGV[6], 2\n"                                                          \
    "end\n"

constexpr const char* kSingleScript = DOCSYNC_SCRIPT_HEAD
    "local max = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
    "if new[1] > max then redis.call('SET', KEYS[2], ARGV[2]) end\n"
    "local hw = redis.call('GET', KEYS[3])\n"
    "local raise = true\n"
    "if hw then\n"
    "  local g, h, l = string.match(hw, '^(%d+)/(%x+)/(%x+)$')\n"
    "  if g then\n"
    "    local old = {tonumber(g), tonumber(h, 16), tonumber(l, 16)}\n"
    "    raise = false\n"
    "    for i = 1, 3 do\n"
    "      if new[i] > old[i] then raise = true break end\n"
    "      if new[i] < old[i] then break end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "if raise then redis.call('SET', KEYS[3], ARGV[2] .. '/' .. ARGV[3] .. '/' .. ARGV[4]) end\n"
    "redis.call('PUBLISH', KEYS[1], message)\n"
    "return sent\n";

constexpr const char* kClusterScript = DOCSYNC_SCRIPT_HEAD
    "redis.call('SPUBLISH', KEYS[1], message)\n"
    "return sent\n";

#undef DOCSYNC_SCRIPT_HEAD

std::string hex32(std::uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%X", v);
    return buf;
}

}  // namespace

const char* doc_script(ScriptKind kind) { return kind == ScriptKind::Single ? kSingleScript : kClusterScript; }

std::vector<std::string_view> ScriptCall::args(ScriptKind kind, std::string_view sha_or_script, bool script) const {
    std::string_view verb = script ? "EVAL" : "EVALSHA";
    std::vector<std::string_view> out;
    if (kind == ScriptKind::Single)
        out = {verb, sha_or_script, "3", key, kMaxGenerationKey, kMaxVersionKey, envelope, generation, hi, lo, ttl};
    else
        out = {verb, sha_or_script, "1", key, envelope, generation, hi, lo, ttl};
    if (!patch.empty()) out.insert(out.end(), {patch, base_generation, base_hi, base_lo});
    return out;
}

void ScriptCall::add_patch(std::string patch_envelope, DocVersion base) {
    patch = std::move(patch_envelope);
    base_generation = std::to_string(base.generation);
    base_hi = hex32(static_cast<std::uint32_t>(base.lsn >> 32));
    base_lo = hex32(static_cast<std::uint32_t>(base.lsn));
}

ScriptCall script_call(std::string key, PatchPlan&& plan, std::chrono::seconds tombstone_ttl, bool tombstone) {
    ScriptCall call{std::move(key),
                    std::move(plan.whole),
                    std::to_string(plan.version.generation),
                    hex32(static_cast<std::uint32_t>(plan.version.lsn >> 32)),
                    hex32(static_cast<std::uint32_t>(plan.version.lsn)),
                    tombstone ? std::to_string(std::chrono::milliseconds(tombstone_ttl).count()) : "0"};
    if (plan.patch) call.add_patch(std::move(*plan.patch), plan.base);
    plan.whole.clear();
    plan.patch.reset();
    return call;
}

std::optional<PatchOutcome> script_outcome(const Reply& reply) {
    if (kind_of(reply) != ReplyKind::Integer) return std::nullopt;
    if (reply->integer == 2) return PatchOutcome::PatchSent;
    if (reply->integer == 1) return PatchOutcome::WholeSent;
    if (reply->integer == 3) return PatchOutcome::WholeSentEqual;
    return PatchOutcome::Stale;
}

ScriptCall script_call(std::string key, const std::string& channel, const std::optional<std::string>& doc,
                       DocVersion version, std::chrono::seconds tombstone_ttl) {
    return {std::move(key),
            make_envelope(channel, doc, version),
            std::to_string(version.generation),
            hex32(static_cast<std::uint32_t>(version.lsn >> 32)),
            hex32(static_cast<std::uint32_t>(version.lsn)),
            doc ? "0" : std::to_string(std::chrono::milliseconds(tombstone_ttl).count())};
}

bool no_script(const Reply& reply) {
    return is_error(reply, "NOSCRIPT");
}

std::optional<Error> judge_script_reply(const Reply& reply, const std::string& where, const std::string& channel) {
    if (is_error(reply)) {
        // DOCSYNC: the script's own refusal (a key of another type under db:), permanent for this doc.
        std::string message = where + " refused the doc for " + channel + ": " + reply_text(reply.get());
        return is_error(reply, "DOCSYNC") ? Error(message) : refused(message);
    }
    if (kind_of(reply) != ReplyKind::Integer)
        return refused(where + " answered the publish of " + channel + " with an unexpected " + reply_text(reply.get()));
    return std::nullopt;
}

std::string info_field(const Reply& info, std::string_view field) {
    std::string text = reply_text(info.get());
    std::string needle = std::string(field) + ":";
    auto at = text.find(needle);
    if (at == std::string::npos) return {};
    auto end = text.find_first_of("\r\n", at);
    return text.substr(at + needle.size(), end == std::string::npos ? std::string::npos : end - at - needle.size());
}

EpochMarker check_epoch_marker(const std::function<Reply(const std::vector<std::string_view>&)>& command,
                               const std::string& key, const std::string& replid) {
    Reply got = command({"GET", key});
    const bool created = kind_of(got) == ReplyKind::Nil;
    if (created) {
        std::random_device random;
        std::string token = std::to_string(random()) + "-" + std::to_string(random());
        command({"SET", key, token + "/" + replid, "NX"});
        got = command({"GET", key});
    }
    if (kind_of(got) != ReplyKind::String) return {};
    std::string_view value(got->str, got->len);
    EpochMarker marker;
    marker.created = created;
    auto slash = value.rfind('/');
    marker.token = std::string(value.substr(0, slash));
    if (slash != std::string_view::npos) marker.replid = std::string(value.substr(slash + 1));
    if (!replid.empty() && marker.replid != replid) {
        marker.other_history = !marker.replid.empty();  // a marker without one just gets it
        command({"SET", key, marker.token + "/" + replid});
    }
    return marker;
}

}  // namespace docsync::publish
