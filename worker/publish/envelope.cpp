// Envelopes: validating, compacting and embedding doc JSON, and reading envelopes back.
#include "publish/envelope.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cctype>
#include <charconv>
#include <cstdint>
#include <vector>

#include "common/error.hpp"

namespace docsync::publish {

namespace {

// JSON text is validated and compacted by one iterative pass (RFC 8259): whitespace between tokens is
// dropped, every token is copied byte for byte. No recursion (a deeply nested doc cannot exhaust the
// stack) and no number conversion (a numeric far beyond double range, which PostgreSQL prints as
// plain digits, stays exact: RapidJSON refuses those).
class Compactor {
public:
    explicit Compactor(std::string_view in) : in_(in) {}

    std::string run() {
        enum class Want { Value, ValueOrClose, Key, KeyOrClose, Colon, CommaOrClose };
        Want want = Want::Value;
        out_.reserve(in_.size());
        for (;;) {
            skip_whitespace();
            if (i_ == in_.size()) {
                if (want == Want::CommaOrClose && stack_.empty()) return std::move(out_);
                fail("unexpected end of the text");
            }
            char c = in_[i_];
            switch (want) {
                case Want::ValueOrClose:
                    if (c == ']') {
                        close();
                        want = Want::CommaOrClose;
                        continue;
                    }
                    [[fallthrough]];
                case Want::Value:
                    if (c == '{') {
                        open('{');
                        want = Want::KeyOrClose;
                    } else if (c == '[') {
                        open('[');
                        want = Want::ValueOrClose;
                    } else {
                        scalar(c);
                        want = Want::CommaOrClose;
                    }
                    continue;
                case Want::KeyOrClose:
                    if (c == '}') {
                        close();
                        want = Want::CommaOrClose;
                        continue;
                    }
                    [[fallthrough]];
                case Want::Key:
                    if (c != '"') fail("expected a string key");
                    string();
                    want = Want::Colon;
                    continue;
                case Want::Colon:
                    if (c != ':') fail("expected ':' after a key");
                    copy(1);
                    want = Want::Value;
                    continue;
                case Want::CommaOrClose:
                    if (stack_.empty()) fail("text after the value");
                    if (c == ',') {
                        copy(1);
                        want = stack_.back() == '{' ? Want::Key : Want::Value;
                    } else if ((c == '}' && stack_.back() == '{') || (c == ']' && stack_.back() == '[')) {
                        close();
                    } else {
                        fail(stack_.back() == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
                    }
                    continue;
            }
        }
    }

private:
    [[noreturn]] void fail(const char* what) {
        throw Error(std::string(what) + " at byte " + std::to_string(i_));
    }
    void skip_whitespace() {
        while (i_ < in_.size() && (in_[i_] == ' ' || in_[i_] == '\t' || in_[i_] == '\n' || in_[i_] == '\r')) ++i_;
    }
    void copy(std::size_t n) {
        out_.append(in_.substr(i_, n));
        i_ += n;
    }
    void open(char kind) {
        stack_.push_back(kind);
        copy(1);
    }
    void close() {
        stack_.pop_back();
        copy(1);
    }
    bool at(char c) const { return i_ < in_.size() && in_[i_] == c; }
    bool digit() const { return i_ < in_.size() && in_[i_] >= '0' && in_[i_] <= '9'; }

    void scalar(char c) {
        if (c == '"') return string();
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        for (std::string_view literal : {"true", "false", "null"}) {
            if (in_.substr(i_, literal.size()) == literal) return copy(literal.size());
        }
        fail("expected a value");
    }

    void number() {
        std::size_t start = i_;
        if (at('-')) ++i_;
        if (at('0')) {
            ++i_;
        } else if (digit()) {
            while (digit()) ++i_;
        } else {
            fail("expected a digit");
        }
        if (at('.')) {
            ++i_;
            if (!digit()) fail("expected a digit after '.'");
            while (digit()) ++i_;
        }
        if (at('e') || at('E')) {
            ++i_;
            if (at('+') || at('-')) ++i_;
            if (!digit()) fail("expected a digit in the exponent");
            while (digit()) ++i_;
        }
        out_.append(in_.substr(start, i_ - start));
    }

    void string() {
        std::size_t start = i_++;
        for (;;) {
            if (i_ >= in_.size()) fail("unterminated string");
            auto c = static_cast<unsigned char>(in_[i_]);
            if (c == '"') {
                ++i_;
                break;
            }
            if (c < 0x20) fail("control character in a string (it must be escaped)");
            if (c == '\\') {
                ++i_;
                if (i_ >= in_.size()) fail("unterminated string");
                char e = in_[i_];
                if (e == 'u') {
                    for (int k = 1; k <= 4; ++k) {
                        if (i_ + k >= in_.size() || !std::isxdigit(static_cast<unsigned char>(in_[i_ + k])))
                            fail("\\u needs four hex digits");
                    }
                    i_ += 5;
                } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                           e == 't') {
                    ++i_;
                } else {
                    fail("invalid escape in a string");
                }
                continue;
            }
            if (c < 0x80) {
                ++i_;
                continue;
            }
            utf8(c);
        }
        out_.append(in_.substr(start, i_ - start));
    }

    // One multi-byte UTF-8 sequence: no overlong forms, no surrogates, nothing above U+10FFFF.
    void utf8(unsigned char lead) {
        int extra;
        std::uint32_t cp, min;
        if (lead >= 0xC2 && lead <= 0xDF) {
            extra = 1, cp = lead & 0x1F, min = 0x80;
        } else if (lead >= 0xE0 && lead <= 0xEF) {
            extra = 2, cp = lead & 0x0F, min = 0x800;
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            extra = 3, cp = lead & 0x07, min = 0x10000;
        } else {
            fail("invalid UTF-8");
        }
        for (int k = 1; k <= extra; ++k) {
            if (i_ + k >= in_.size()) fail("invalid UTF-8");
            auto b = static_cast<unsigned char>(in_[i_ + k]);
            if ((b & 0xC0) != 0x80) fail("invalid UTF-8");
            cp = (cp << 6) | (b & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8");
        i_ += static_cast<std::size_t>(extra) + 1;
    }

    std::string_view in_;
    std::size_t i_ = 0;
    std::string out_;
    std::vector<char> stack_;
};

std::string compact_or_throw(std::string_view json, std::string_view what) {
    try {
        return Compactor(json).run();
    } catch (const Error& e) {
        throw Error(std::string(what) + " is not valid JSON: " + e.what() +
                    "; a doc query must return one json or jsonb value");
    }
}

}  // namespace

std::string compact_json(std::string_view json) { return compact_or_throw(json, "the value"); }

std::string make_envelope(std::string_view channel, const std::optional<std::string>& doc, DocVersion version) {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    writer.StartObject();
    writer.Key("channel");
    writer.String(channel.data(), static_cast<rapidjson::SizeType>(channel.size()));
    writer.Key("doc");
    if (doc) {
        std::string compact = compact_or_throw(*doc, "the doc for " + std::string(channel));
        writer.RawValue(compact.data(), compact.size(), rapidjson::kObjectType);
    } else {
        writer.Null();
    }
    writer.Key("generation");
    writer.Uint64(version.generation);
    writer.Key("lsn");
    std::string lsn = format_lsn(version.lsn);
    writer.String(lsn.data(), static_cast<rapidjson::SizeType>(lsn.size()));
    writer.EndObject();
    return std::string(buffer.GetString(), buffer.GetSize());
}

std::optional<EnvelopeHead> parse_envelope(std::string_view text) {
    // Only envelopes this code wrote are accepted, so the fields are where make_envelope puts them:
    // {"channel":<string>,"doc":<json>,"generation":<digits>,"lsn":"<hex>/<hex>"}. The doc is never
    // converted (it may hold numbers no double can).
    try {
        Compactor(text).run();  // one whole valid JSON value
    } catch (const Error&) {
        return std::nullopt;
    }
    constexpr std::string_view head = R"({"channel":")";
    if (text.substr(0, head.size()) != head) return std::nullopt;
    std::size_t i = head.size();
    while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
    if (i >= text.size()) return std::nullopt;
    std::string_view channel_json = text.substr(head.size() - 1, i + 2 - head.size());
    if (text.substr(i + 1, 7) != R"(,"doc":)") return std::nullopt;

    constexpr std::string_view gen_key = R"(,"generation":)";
    constexpr std::string_view lsn_key = R"(,"lsn":")";
    auto gen_at = text.rfind(gen_key);
    auto lsn_at = text.rfind(lsn_key);
    if (gen_at == std::string_view::npos || lsn_at == std::string_view::npos || lsn_at < gen_at ||
        text.substr(text.size() - 2) != "\"}")
        return std::nullopt;
    std::string_view digits = text.substr(gen_at + gen_key.size(), lsn_at - gen_at - gen_key.size());
    std::uint64_t generation = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), generation);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    auto lsn = parse_lsn(text.substr(lsn_at + lsn_key.size(), text.size() - 2 - lsn_at - lsn_key.size()));
    if (!lsn) return std::nullopt;

    rapidjson::Document channel;
    channel.Parse(channel_json.data(), channel_json.size());
    if (channel.HasParseError() || !channel.IsString()) return std::nullopt;
    EnvelopeHead result;
    result.channel.assign(channel.GetString(), channel.GetStringLength());
    result.version = DocVersion{generation, *lsn};
    return result;
}

}  // namespace docsync::publish
