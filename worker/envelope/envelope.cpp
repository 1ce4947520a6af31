// Envelopes: validating, compacting and embedding doc JSON, and reading envelopes back.
#include "envelope/envelope.hpp"

#include <charconv>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/error.hpp"
#include "common/json_scan.hpp"

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
    void scalar(char c) {
        if (c == '"') return string();
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        if (auto lit = json_scan::literal(in_, i_); lit != json_scan::Literal::None)
            return copy(json_scan::literal_size(lit));
        fail("expected a value");
    }

    void number() {
        std::size_t start = i_;
        if (auto e = json_scan::number(in_, i_); e != json_scan::ScanError::None)
            fail(json_scan::number_error_text(e));
        out_.append(in_.substr(start, i_ - start));
    }

    void string() {
        using json_scan::ScanError;
        std::size_t start = i_;
        switch (json_scan::string<true>(in_, i_).error) {
            case ScanError::None:
                break;
            case ScanError::ControlCharacter:
                fail("control character in a string (it must be escaped)");
            case ScanError::BadUtf8:
                fail("invalid UTF-8");
            case ScanError::Unterminated:
                fail("unterminated string");
            // Escape errors are reported at the byte after the backslash.
            case ScanError::UnterminatedEscape:
                ++i_;
                fail("unterminated string");
            case ScanError::ShortUnicodeEscape:
            case ScanError::BadUnicodeEscape:
                ++i_;
                fail("\\u needs four hex digits");
            default:
                ++i_;
                fail("invalid escape in a string");
        }
        out_.append(in_.substr(start, i_ - start));
    }

    std::string_view in_;
    std::size_t i_ = 0;
    std::string out_;
    std::vector<char> stack_;
};

// Appends `text` as a JSON string. Channels are UTF-8 (PostgreSQL text in a UTF8 database); anything
// else cannot be written as JSON and is refused.
void append_json_string(std::string& out, std::string_view text) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::size_t start = out.size();
    out.push_back('"');
    for (char ch : text) {
        auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(ch);
        } else if (c < 0x20 || c == 0x7F) {
            out += "\\u00";
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 0xF]);
        } else {
            out.push_back(ch);
        }
    }
    out.push_back('"');
    try {
        Compactor(std::string_view(out).substr(start)).run();  // validates the UTF-8
    } catch (const Error&) {
        throw Error("the channel " + std::string(text) + " is not valid UTF-8; docsync needs a UTF8 database");
    }
}

// The text of a JSON string token already validated by the Compactor (quotes included); nullopt for
// a lone surrogate escape, which names no character.
std::optional<std::string> unescape_json_string(std::string_view token) {
    std::string out;
    auto hex4 = [&](std::size_t at) {
        std::uint32_t v = 0;
        for (std::size_t k = 0; k < 4; ++k) {
            char h = token[at + k];
            v = v * 16 + static_cast<std::uint32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        return v;
    };
    for (std::size_t i = 1; i + 1 < token.size(); ++i) {
        char c = token[i];
        if (c != '\\') {
            out.push_back(c);
            continue;
        }
        char e = token[++i];
        switch (e) {
            case 'b': out.push_back('\b'); break;
            case 'f': out.push_back('\f'); break;
            case 'n': out.push_back('\n'); break;
            case 'r': out.push_back('\r'); break;
            case 't': out.push_back('\t'); break;
            case 'u': {
                std::uint32_t cp = hex4(i + 1);
                i += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (i + 6 >= token.size() || token[i + 1] != '\\' || token[i + 2] != 'u') return std::nullopt;
                    std::uint32_t low = hex4(i + 3);
                    if (low < 0xDC00 || low > 0xDFFF) return std::nullopt;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    i += 6;
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return std::nullopt;
                }
                json_scan::append_utf8(out, cp);
                break;
            }
            default: out.push_back(e); break;  // " \ /
        }
    }
    return out;
}

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
    std::string compact = doc ? compact_or_throw(*doc, "the doc for " + std::string(channel)) : std::string("null");
    std::string out;
    out.reserve(compact.size() + channel.size() + 80);
    out += R"({"channel":)";
    append_json_string(out, channel);
    out += R"(,"doc":)";
    out += compact;
    out += R"(,"generation":)";
    out += std::to_string(version.generation);
    out += R"(,"lsn":")";
    out += format_lsn(version.lsn);
    out += "\"}";
    return out;
}

std::string make_patch_envelope(std::string_view channel, EnvelopeKind kind, std::string_view patch_text,
                                DocVersion base, DocVersion version) {
    if (kind == EnvelopeKind::Doc) throw Error("make_patch_envelope needs a patch kind, not a whole doc");
    std::string compact = compact_or_throw(patch_text, "the patch for " + std::string(channel));
    const char open = kind == EnvelopeKind::JsonPatch ? '[' : '{';
    if (compact.empty() || compact.front() != open)
        throw Error("the patch for " + std::string(channel) + " is not a JSON " +
                    (kind == EnvelopeKind::JsonPatch ? "array (RFC 6902)" : "object (RFC 7386)"));
    std::string out;
    out.reserve(compact.size() + channel.size() + 140);
    out += R"({"channel":)";
    append_json_string(out, channel);
    out += kind == EnvelopeKind::JsonPatch ? R"(,"patch":)" : R"(,"merge":)";
    out += compact;
    out += R"(,"base_generation":)";
    out += std::to_string(base.generation);
    out += R"(,"base_lsn":")";
    out += format_lsn(base.lsn);
    out += R"(","generation":)";
    out += std::to_string(version.generation);
    out += R"(,"lsn":")";
    out += format_lsn(version.lsn);
    out += "\"}";
    return out;
}

namespace {

// "G" and "X/Y" at [gen_from, gen_to) and [lsn_from, lsn_to) of `text`, as a version.
std::optional<DocVersion> read_version(std::string_view digits, std::string_view lsn_text) {
    std::uint64_t generation = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), generation);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
    auto lsn = parse_lsn(lsn_text);
    if (!lsn) return std::nullopt;
    return DocVersion{generation, *lsn};
}

}  // namespace

std::optional<EnvelopeHead> parse_envelope(std::string_view text) {
    // Only envelopes this code wrote are accepted, so the fields are where make_envelope and
    // make_patch_envelope put them:
    //   {"channel":<string>,"doc":<json>,"generation":<digits>,"lsn":"<hex>/<hex>"}
    //   {"channel":<string>,"patch"|"merge":<json>,"base_generation":<digits>,"base_lsn":"<hex>/<hex>",
    //    "generation":<digits>,"lsn":"<hex>/<hex>"}
    // The doc is never converted (it may hold numbers no double can).
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
    EnvelopeKind kind;
    std::size_t doc_at;
    if (text.substr(i + 1, 7) == R"(,"doc":)") {
        kind = EnvelopeKind::Doc;
        doc_at = i + 8;
    } else if (text.substr(i + 1, 9) == R"(,"patch":)") {
        kind = EnvelopeKind::JsonPatch;
        doc_at = i + 10;
    } else if (text.substr(i + 1, 9) == R"(,"merge":)") {
        kind = EnvelopeKind::MergePatch;
        doc_at = i + 10;
    } else {
        return std::nullopt;
    }

    constexpr std::string_view gen_key = R"(,"generation":)";
    constexpr std::string_view lsn_key = R"(,"lsn":")";
    auto gen_at = text.rfind(gen_key);
    auto lsn_at = text.rfind(lsn_key);
    if (gen_at == std::string_view::npos || lsn_at == std::string_view::npos || lsn_at < gen_at || gen_at < doc_at ||
        text.substr(text.size() - 2) != "\"}")
        return std::nullopt;
    auto version = read_version(text.substr(gen_at + gen_key.size(), lsn_at - gen_at - gen_key.size()),
                                text.substr(lsn_at + lsn_key.size(), text.size() - 2 - lsn_at - lsn_key.size()));
    if (!version) return std::nullopt;
    std::size_t doc_end = gen_at;
    std::optional<DocVersion> base;
    if (kind != EnvelopeKind::Doc) {
        // ,"base_generation":G,"base_lsn":"X/Y" just before ,"generation":
        constexpr std::string_view base_gen_key = R"(,"base_generation":)";
        constexpr std::string_view base_lsn_key = R"(,"base_lsn":")";
        auto base_gen_at = text.rfind(base_gen_key, gen_at);
        auto base_lsn_at = text.rfind(base_lsn_key, gen_at);
        if (base_gen_at == std::string_view::npos || base_lsn_at == std::string_view::npos ||
            base_lsn_at < base_gen_at || base_gen_at < doc_at || text[gen_at - 1] != '"')
            return std::nullopt;
        base = read_version(text.substr(base_gen_at + base_gen_key.size(), base_lsn_at - base_gen_at - base_gen_key.size()),
                            text.substr(base_lsn_at + base_lsn_key.size(), gen_at - 1 - base_lsn_at - base_lsn_key.size()));
        if (!base) return std::nullopt;
        doc_end = base_gen_at;
        const char open = kind == EnvelopeKind::JsonPatch ? '[' : '{';
        if (doc_end <= doc_at || text[doc_at] != open) return std::nullopt;
    }

    auto channel = unescape_json_string(channel_json);
    if (!channel) return std::nullopt;
    EnvelopeHead result;
    result.channel = std::move(*channel);
    result.version = *version;
    result.kind = kind;
    result.base = base;
    result.doc_at = doc_at;
    result.doc_size = doc_end - doc_at;
    return result;
}

std::optional<RetainedDoc> retained_doc(std::string_view text, std::string_view channel) {
    auto head = parse_envelope(text);
    if (!head || head->is_patch() || head->channel != channel) return std::nullopt;
    RetainedDoc out;
    out.version = head->version;
    std::string_view doc = text.substr(head->doc_at, head->doc_size);
    if (doc != "null") out.doc = std::string(doc);
    return out;
}

}  // namespace docsync::publish
