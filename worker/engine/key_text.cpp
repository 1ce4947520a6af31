// Canonical key text; the rules are in key_text.hpp.
#include "engine/key_text.hpp"

#include <cstdint>

#include "engine/channel.hpp"
#include "engine/key_text_forms.hpp"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace docsync {

namespace {

using namespace key_text_forms;

// Valid UTF-8 (RFC 3629: shortest forms only, no surrogates, nothing past U+10FFFF), as PostgreSQL
// reads text on a UTF8 connection.
bool valid_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        auto c = static_cast<unsigned char>(s[i]);
        std::size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        std::uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
        for (std::size_t k = 1; k < n; ++k) {
            auto t = static_cast<unsigned char>(s[i + k]);
            if ((t & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (t & 0x3Fu);
        }
        static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += n;
    }
    return true;
}

// oid: an unsigned 32-bit number; PostgreSQL also reads -1 … -2^31 as their unsigned equivalents.
KeyCheck check_oid(std::string_view text) {
    bool negative = false;
    std::uint64_t magnitude = 0;
    if (!read_integer(text, negative, magnitude)) return refuse("not a valid oid");
    if (negative ? magnitude > 2147483648ULL : magnitude > 4294967295ULL) return refuse("out of range for oid");
    std::uint64_t value = negative && magnitude ? 4294967296ULL - magnitude : magnitude;
    return against(text, std::to_string(value));
}

// bool: any prefix of true/false/yes/no, on/off (two letters at least), 1/0, in any case; printed t or f.
KeyCheck check_bool(std::string_view text) {
    std::string s;
    for (char c : trim(text)) s.push_back(lower(c));
    auto prefix_of = [&](std::string_view word, std::size_t min) {
        return s.size() >= min && s.size() <= word.size() && word.substr(0, s.size()) == s;
    };
    if (prefix_of("true", 1) || prefix_of("yes", 1) || prefix_of("on", 2) || s == "1") return against(text, "t");
    if (prefix_of("false", 1) || prefix_of("no", 1) || prefix_of("off", 2) || s == "0") return against(text, "f");
    return refuse("not a valid bool");
}

// uuid: 32 hex digits in any case, a '-' allowed after any group of four, the whole optionally in
// braces; printed lower-case, 8-4-4-4-12.
KeyCheck check_uuid(std::string_view text) {
    std::string_view s = text;
    if (!s.empty() && s.front() == '{') {
        if (s.size() < 2 || s.back() != '}') return refuse("not a valid uuid");
        s = s.substr(1, s.size() - 2);
    }
    std::string hex;
    for (std::size_t i = 0; i < s.size(); ++i) {
        char c = lower(s[i]);
        bool is_hex = is_digit(c) || (c >= 'a' && c <= 'f');
        if (is_hex && hex.size() < 32) {
            hex.push_back(c);
        } else if (c == '-' && !hex.empty() && hex.size() % 4 == 0 && hex.size() < 32 && i + 1 < s.size()) {
            continue;
        } else {
            return refuse("not a valid uuid");
        }
    }
    if (hex.size() != 32) return refuse("not a valid uuid");
    std::string canonical = hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
                            hex.substr(16, 4) + "-" + hex.substr(20);
    return against(text, canonical);
}

// name: at most 63 bytes; PostgreSQL cuts a longer one at a character boundary.
KeyCheck check_name(std::string_view text) {
    if (text.size() <= 63) return {};
    std::size_t cut = 63;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    return against(text, std::string(text.substr(0, cut)));
}

bool days_ok(long year, int month, int day, bool bc) {
    if (month < 1 || month > 12 || day < 1) return false;
    static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    long y = bc ? 1 - year : year;  // 1 BC is a leap year (year 0)
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return day <= kDays[month - 1] + (month == 2 && leap ? 1 : 0);
}

// Reads exactly `n` digits (n > 0) or, with n == 0, four digits or more without a leading zero
// beyond four; advances `s`.
bool read_digits(std::string_view& s, std::size_t n, long& out) {
    std::size_t len = 0;
    while (len < s.size() && is_digit(s[len])) ++len;
    if (n ? len < n : len < 4) return false;
    if (n) len = n;
    if (!n && len > 4 && s[0] == '0') return false;
    if (len > 9) return false;
    out = 0;
    for (std::size_t i = 0; i < len; ++i) out = out * 10 + (s[i] - '0');
    s.remove_prefix(len);
    return true;
}

bool eat(std::string_view& s, char c) {
    if (s.empty() || s.front() != c) return false;
    s.remove_prefix(1);
    return true;
}

// The canonical date, timestamp or timestamptz forms (ISO, UTC): YYYY-MM-DD, then for timestamps
// " HH:MM:SS" with ".f…" (no trailing zero) when there is a fraction, then "+00" for timestamptz,
// then " BC" for years before 1; or infinity, -infinity.
bool canonical_datetime(std::string_view s, bool time, bool zone) {
    if (s == "infinity" || s == "-infinity") return true;
    long year = 0, month = 0, day = 0;
    if (!read_digits(s, 0, year) || !eat(s, '-') || !read_digits(s, 2, month) || !eat(s, '-') ||
        !read_digits(s, 2, day))
        return false;
    if (time) {
        long hour = 0, minute = 0, second = 0;
        if (!eat(s, ' ') || !read_digits(s, 2, hour) || !eat(s, ':') || !read_digits(s, 2, minute) ||
            !eat(s, ':') || !read_digits(s, 2, second) || hour > 23 || minute > 59 || second > 59)
            return false;
        if (eat(s, '.')) {
            std::size_t len = 0;
            while (len < s.size() && is_digit(s[len])) ++len;
            if (len == 0 || len > 6 || s[len - 1] == '0') return false;
            s.remove_prefix(len);
        }
        if (zone && s.substr(0, 3) != "+00") return false;
        if (zone) s.remove_prefix(3);
    }
    bool bc = s == " BC";
    if (!s.empty() && !bc) return false;
    return year >= 1 && days_ok(year, static_cast<int>(month), static_cast<int>(day), bc);
}

// Inside the type's range (PostgreSQL's datatype/timestamp.h): from 4714-11-24 BC (Julian day 0)
// to 5874897-12-31 for a date, to 294276-12-31 23:59:59.999999 for a timestamp (UTC for
// timestamptz). Takes a canonical spelling.
bool in_range(std::string_view s, bool time) {
    if (s == "infinity" || s == "-infinity") return true;
    auto dash = s.find('-');
    long year = std::stol(std::string(s.substr(0, dash)));
    int month = std::stoi(std::string(s.substr(dash + 1, 2)));
    int day = std::stoi(std::string(s.substr(dash + 4, 2)));
    bool bc = s.size() > 3 && s.substr(s.size() - 3) == " BC";
    if (bc) return year < 4714 || (year == 4714 && (month > 11 || (month == 11 && day >= 24)));
    return year <= (time ? 294276 : 5874897);
}

KeyCheck check_datetime(std::string_view type, std::string_view text) {
    bool time = type != "date", zone = type == "timestamptz";
    if (canonical_datetime(text, time, zone)) {
        if (in_range(text, time)) return {};
        return refuse("out of range for " + std::string(type) + " (PostgreSQL reads no such value)");
    }
    // the spellings people write most: an ISO 'T', a UTC offset written out, a fraction's trailing zeros
    std::string fixed(trim(text));
    if (time && fixed.size() > 10 && fixed[10] == 'T') fixed[10] = ' ';
    if (zone) {
        for (std::string_view utc : {"Z", "z", "+00:00", "+0000", "-00", "-00:00", " UTC", "+00"}) {
            if (fixed.size() > utc.size() && fixed.compare(fixed.size() - utc.size(), utc.size(), utc) == 0) {
                fixed.replace(fixed.size() - utc.size(), utc.size(), "+00");
                break;
            }
        }
    }
    auto dot = fixed.find('.');
    if (time && dot != std::string::npos) {
        auto end = dot + 1;
        while (end < fixed.size() && is_digit(fixed[end])) ++end;
        auto last = end;
        while (last > dot + 1 && fixed[last - 1] == '0') --last;
        fixed.erase(last == dot + 1 ? dot : last, end - (last == dot + 1 ? dot : last));
    }
    if (canonical_datetime(fixed, time, zone)) {
        if (!in_range(fixed, time)) return refuse("out of range for " + std::string(type) + " (PostgreSQL reads no such value)");
        return against(text, fixed);
    }
    std::string form = type == "date" ? "YYYY-MM-DD" : zone ? "YYYY-MM-DD HH:MM:SS[.ffffff]+00 (UTC)"
                                                            : "YYYY-MM-DD HH:MM:SS[.ffffff]";
    return refuse("not in canonical form: write a " + std::string(type) + " as PostgreSQL prints it, " + form);
}

std::size_t utf8_chars(std::string_view s) {
    std::size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

// The byte length of the first `chars` characters of valid UTF-8 `s`.
std::size_t utf8_prefix(std::string_view s, std::size_t chars) {
    std::size_t i = 0;
    for (std::size_t seen = 0; i < s.size(); ++i) {
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == chars) break;
    }
    return i;
}

// varchar(n) and bpchar(n) (character(n)), the typmod of a domain over them: PostgreSQL drops
// spaces past n characters (anything else past n is an error), and pads a bpchar to n.
KeyCheck check_sized_string(std::string_view base, std::size_t n, std::string_view text) {
    std::size_t chars = utf8_chars(text);
    std::string type = std::string(base) + "(" + std::to_string(n) + ")";
    if (chars > n) {
        std::string_view head = text.substr(0, utf8_prefix(text, n));
        if (text.substr(head.size()).find_first_not_of(' ') != std::string_view::npos)
            return refuse("longer than " + std::to_string(n) + " characters: too long for " + type);
        return against(text, std::string(head));
    }
    if (base == "bpchar" && chars < n) return against(text, std::string(text) + std::string(n - chars, ' '));
    return {};
}

// bpchar without a size: what a char(n) column gives its doc query's param (PostgreSQL types `$1`
// of `code = $1` as plain bpchar, the width being the column's, not the param's). Trailing spaces
// are no part of a bpchar's value (its equality, hashing and cast to text ignore them), so "FR",
// "FR " and "FR  " are one key; its canonical text is the value without them, what `$1::text`
// gives. Only U+0020 is such a space: a tab, a no-break space or any other character is kept.
KeyCheck check_bpchar(std::string_view text) {
    auto last = text.find_last_not_of(' ');
    std::string canonical(last == std::string_view::npos ? std::string_view() : text.substr(0, last + 1));
    if (text == canonical) return {};
    KeyCheck check = refuse(
        "trailing spaces are no part of a character value (bpchar equality ignores them): "
        "the same value is spelled \"" + canonical + "\"");
    check.canonical = canonical;
    return check;
}

// A bpchar[] ("_bpchar", a char(n)[] column's param): an element's trailing spaces are no part of
// it, and the server check prints $n::text[] (Runner::print_keys), so a spelling that
// trim_bpchar_array changes names another channel; refused here, before any compute, naming it. A
// spelling it leaves as is (or cannot read) is still the server's to check.
KeyCheck check_bpchar_array(std::string_view text) {
    auto trimmed = trim_bpchar_array(text);
    if (!trimmed || *trimmed == text) return {};
    KeyCheck check = refuse(
        "not as PostgreSQL prints a bpchar[]: trailing spaces are no part of a char(n) element and quotes only "
        "where needed; the same value is spelled \"" + *trimmed + "\"");
    check.canonical = std::move(*trimmed);
    return check;
}

// timestamp(p), timestamptz(p): PostgreSQL rounds a value to p fractional digits.
KeyCheck check_timestamp_precision(std::string_view base, std::size_t p, std::string_view text) {
    KeyCheck check = check_datetime(base, text);
    if (!check.ok) return check;
    auto dot = text.find('.');
    if (dot == std::string_view::npos) return {};
    std::size_t digits = 0;
    while (dot + 1 + digits < text.size() && is_digit(text[dot + 1 + digits])) ++digits;
    if (digits <= p) return {};
    return refuse("more fractional digits than " + std::string(base) + "(" + std::to_string(p) +
                  ") keeps: PostgreSQL rounds it to " + std::to_string(p));
}

// "varchar(3)" -> base "varchar", size 3; false when `type` carries no size.
bool sized(std::string_view type, std::string_view& base, std::size_t& size) {
    auto open = type.find('(');
    if (open == std::string_view::npos || type.back() != ')' || open + 2 > type.size() - 1) return false;
    base = type.substr(0, open);
    size = 0;
    for (char c : type.substr(open + 1, type.size() - open - 2)) {
        if (!is_digit(c) || size > 100000000) return false;
        size = size * 10 + static_cast<std::size_t>(c - '0');
    }
    return true;
}

}  // namespace

KeyCheck check_key_text(std::string_view type, std::string_view text) {
    if (!valid_utf8(text)) return refuse("not valid UTF-8 (PostgreSQL reads no such " + std::string(type.empty() ? "value" : type) + ")");
    if (type == "int2") return check_integer(type, text, 32767);
    if (type == "int4") return check_integer(type, text, 2147483647);
    if (type == "int8") return check_integer(type, text, 9223372036854775807ULL);
    if (type == "oid") return check_oid(text);
    if (type == "bool") return check_bool(text);
    if (type == "uuid") return check_uuid(text);
    if (type == "name") return check_name(text);
    if (type == "bpchar") return check_bpchar(text);
    if (type == "_bpchar") return check_bpchar_array(text);
    if (type == "date" || type == "timestamp" || type == "timestamptz") return check_datetime(type, text);
    if (type == "inet" || type == "cidr") return check_network(type, text);
    if (type == "macaddr" || type == "macaddr8") return check_macaddr(type, text);
    if (type == "bit" || type == "varbit") return check_bits(type, 0, text);
    if (type == "int4range" || type == "int8range") return check_integer_range(type, text);
    std::string_view base;
    std::size_t size = 0;
    if (sized(type, base, size)) {
        if (base == "varchar" || base == "bpchar") return check_sized_string(base, size, text);
        if (base == "timestamp" || base == "timestamptz") return check_timestamp_precision(base, size, text);
        if ((base == "bit" || base == "varbit") && size > 0) return check_bits(base, size, text);
    }
    return {};  // text, varchar: every text is canonical; other types are not checked
}

bool key_type_checked(std::string_view type) {
    static const char* const kChecked[] = {"int2", "int4", "int8", "oid", "bool", "uuid", "name", "text", "varchar",
                                           "bpchar", "date", "timestamp", "timestamptz", "inet", "cidr", "macaddr", "macaddr8",
                                           "bit", "varbit", "int4range", "int8range"};
    for (const char* t : kChecked)
        if (type == t) return true;
    std::string_view base;
    std::size_t size = 0;
    return sized(type, base, size) && (base == "varchar" || base == "bpchar" || base == "timestamp" ||
                                       base == "timestamptz" || base == "bit" || base == "varbit");
}

bool key_types_checked(const std::vector<std::string>& types, std::size_t params) {
    if (types.size() < params) return true;  // unknown (definitions made in tests): not checked
    for (std::size_t i = 0; i < params; ++i)
        if (!key_type_checked(types[i])) return false;
    return true;
}

KeyCheck check_key(const std::vector<std::string>& types, const SqlArgs& values) {
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (!values[i]) continue;
        // beyond the known types (none known, or a type docsync does not check): still valid UTF-8
        KeyCheck check = check_key_text(i < types.size() ? std::string_view(types[i]) : std::string_view(), *values[i]);
        if (!check.ok) {
            check.problem = "param " + std::to_string(i + 1) + " (" + (i < types.size() ? types[i] : "?") + "): " + check.problem;
            check.param = i;
            return check;
        }
    }
    return {};
}

SqlArgs canonical_key(const std::vector<std::string>& types, SqlArgs values) {
    for (std::size_t i = 0; i < values.size() && i < types.size(); ++i) {
        if (!values[i]) continue;
        if (types[i] == "_bpchar") {  // server-checked, which prints $n::text[]: the elements trimmed
            if (auto trimmed = trim_bpchar_array(*values[i])) values[i] = std::move(*trimmed);
            continue;
        }
        KeyCheck check = check_key_text(types[i], *values[i]);
        if (!check.ok && check.canonical) values[i] = std::move(*check.canonical);
    }
    return values;
}

KeyCheck check_channel_key(std::string_view query, const std::vector<std::string>& types, const SqlArgs& values) {
    KeyCheck check = check_key(types, values);
    if (check.ok || !check.canonical) return check;
    SqlArgs fixed = values;
    fixed[check.param] = *check.canonical;
    // the whole key may hold other non-canonical values: name the channel only when it is right
    KeyCheck rest = check_key(types, fixed);
    if (rest.ok) check.problem += "; the doc's channel is \"" + build_channel(query, fixed) + "\"";
    return check;
}

std::string key_types_json(const std::vector<DocQuery>& queries) {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    writer.StartObject();
    for (const auto& q : queries) {
        if (q.key_types.empty() && !q.params.empty()) continue;
        writer.Key(q.name.data(), static_cast<rapidjson::SizeType>(q.name.size()));
        writer.StartArray();
        for (const auto& t : q.key_types) writer.String(t.data(), static_cast<rapidjson::SizeType>(t.size()));
        writer.EndArray();
    }
    writer.EndObject();
    return std::string(buffer.GetString(), buffer.GetSize());
}

bool parse_key_types_json(std::string_view json, std::map<std::string, std::vector<std::string>>& out) {
    rapidjson::Document doc;
    // flat input: an object of arrays of strings, nothing nested deeper is accepted
    doc.Parse<rapidjson::kParseStopWhenDoneFlag>(json.data(), json.size());
    if (doc.HasParseError() || !doc.IsObject()) return false;
    std::map<std::string, std::vector<std::string>> parsed;
    for (const auto& member : doc.GetObject()) {
        if (!member.value.IsArray()) return false;
        std::vector<std::string> types;
        for (const auto& t : member.value.GetArray()) {
            if (!t.IsString()) return false;
            types.emplace_back(t.GetString(), t.GetStringLength());
        }
        parsed.emplace(std::string(member.name.GetString(), member.name.GetStringLength()), std::move(types));
    }
    out = std::move(parsed);
    return true;
}

}  // namespace docsync
