// Canonical key text of network addresses, bit strings and integer ranges; see key_text_forms.hpp.
#include "engine/key_text_forms.hpp"

#include <array>
#include <optional>
#include <vector>

namespace docsync::key_text_forms {

namespace {

int hex_value(char c) {
    if (is_digit(c)) return c - '0';
    char l = lower(c);
    return l >= 'a' && l <= 'f' ? l - 'a' + 10 : -1;
}

// A decimal number without sign, spaces or leading zeros ("0" itself is fine), at most `max`.
std::optional<unsigned> plain_number(std::string_view s, unsigned max) {
    if (s.empty() || s.size() > 10 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
    std::uint64_t v = 0;
    for (char c : s) {
        if (!is_digit(c)) return std::nullopt;
        v = v * 10 + static_cast<unsigned>(c - '0');
    }
    if (v > max) return std::nullopt;
    return static_cast<unsigned>(v);
}

// Four dotted decimal octets into `out`; false unless plainly written.
bool read_ipv4(std::string_view s, std::uint8_t* out) {
    for (int i = 0; i < 4; ++i) {
        auto dot = i < 3 ? s.find('.') : s.size();
        if (dot == std::string_view::npos) return false;
        auto octet = plain_number(s.substr(0, dot), 255);
        if (!octet) return false;
        out[i] = static_cast<std::uint8_t>(*octet);
        s.remove_prefix(i < 3 ? dot + 1 : dot);
    }
    return s.empty();
}

// Eight 16-bit groups (one "::" at most, an IPv4 address as the last 32 bits allowed), in any case.
bool read_ipv6(std::string_view s, std::array<std::uint8_t, 16>& out) {
    std::vector<std::uint16_t> head, tail;
    bool gap = false;
    std::vector<std::uint16_t>* into = &head;
    if (s.substr(0, 2) == "::") {
        gap = true;
        into = &tail;
        s.remove_prefix(2);
    } else if (!s.empty() && s.front() == ':') {
        return false;
    }
    while (!s.empty()) {
        auto colon = s.find(':');
        std::string_view group = s.substr(0, colon);
        if (group.find('.') != std::string_view::npos) {  // the last 32 bits as IPv4
            std::uint8_t v4[4];
            if (colon != std::string_view::npos || !read_ipv4(group, v4)) return false;
            into->push_back(static_cast<std::uint16_t>(v4[0] << 8 | v4[1]));
            into->push_back(static_cast<std::uint16_t>(v4[2] << 8 | v4[3]));
            s = {};
            break;
        }
        if (group.empty() || group.size() > 4) return false;
        unsigned v = 0;
        for (char c : group) {
            int h = hex_value(c);
            if (h < 0) return false;
            v = v * 16 + static_cast<unsigned>(h);
        }
        into->push_back(static_cast<std::uint16_t>(v));
        if (colon == std::string_view::npos) break;
        s.remove_prefix(colon + 1);
        if (!s.empty() && s.front() == ':') {
            if (gap) return false;
            gap = true;
            into = &tail;
            s.remove_prefix(1);
        } else if (s.empty()) {
            return false;  // a trailing single ':'
        }
    }
    std::size_t groups = head.size() + tail.size();
    if (gap ? groups > 7 : groups != 8) return false;
    std::vector<std::uint16_t> words(head);
    words.resize(8 - tail.size(), 0);
    words.insert(words.end(), tail.begin(), tail.end());
    for (int i = 0; i < 8; ++i) {
        out[2 * i] = static_cast<std::uint8_t>(words[i] >> 8);
        out[2 * i + 1] = static_cast<std::uint8_t>(words[i] & 0xFF);
    }
    return true;
}

std::string dotted(const std::uint8_t* a) {
    return std::to_string(a[0]) + "." + std::to_string(a[1]) + "." + std::to_string(a[2]) + "." + std::to_string(a[3]);
}

// An IPv6 address as PostgreSQL prints it: lower-case groups without leading zeros, the first
// longest run of two zero groups or more as "::", the last 32 bits dotted for an address of the
// forms ::a.b.c.d and ::ffff:a.b.c.d.
std::string print_ipv6(const std::array<std::uint8_t, 16>& a) {
    unsigned words[8];
    for (int i = 0; i < 8; ++i) words[i] = static_cast<unsigned>(a[2 * i] << 8 | a[2 * i + 1]);
    int best = -1, best_len = 0;
    for (int i = 0; i < 8;) {
        if (words[i] != 0) {
            ++i;
            continue;
        }
        int len = 0;
        while (i + len < 8 && words[i + len] == 0) ++len;
        if (len > best_len) best = i, best_len = len;
        i += len;
    }
    if (best_len < 2) best = -1;
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (int i = 0; i < 8; ++i) {
        if (best >= 0 && i >= best && i < best + best_len) {
            if (i == best) out += ':';
            continue;
        }
        if (i != 0) out += ':';
        if (i == 6 && best == 0 && (best_len == 6 || (best_len == 5 && words[5] == 0xffff))) {
            out += dotted(a.data() + 12);
            return out;
        }
        std::string group;
        for (unsigned w = words[i]; w || group.empty(); w >>= 4) group.insert(group.begin(), kHex[w & 0xF]);
        out += group;
    }
    if (best >= 0 && best + best_len == 8) out += ':';
    return out;
}

// Whether the address's bits past `bits` are all zero (a cidr's rule).
bool host_bits_zero(const std::uint8_t* a, std::size_t bytes, unsigned bits) {
    for (std::size_t i = 0; i < bytes; ++i) {
        unsigned first = static_cast<unsigned>(i) * 8;
        std::uint8_t mask = bits >= first + 8 ? 0xFF : bits <= first ? 0 : static_cast<std::uint8_t>(0xFF << (8 - (bits - first)));
        if (a[i] & ~mask) return false;
    }
    return true;
}

std::string range_bound(bool negative, std::uint64_t magnitude) {
    // Appended, not "-" + to_string(…): GCC 12's -Wrestrict misreads that insert at -O2 (a false
    // positive, but the Release build prints no warnings).
    std::string text = negative && magnitude ? "-" : "";
    text += std::to_string(magnitude);
    return text;
}

// An integer range bound as PostgreSQL reads it (quoted or not); false when it is not one.
bool read_range_integer(std::string_view s, std::int64_t max, std::optional<std::int64_t>& out) {
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
    bool negative = false;
    std::uint64_t magnitude = 0;
    if (!read_integer(s, negative, magnitude)) return false;
    if (negative ? magnitude > static_cast<std::uint64_t>(max) + 1 : magnitude > static_cast<std::uint64_t>(max))
        return false;
    out = negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
    return true;
}

}  // namespace

bool read_integer(std::string_view text, bool& negative, std::uint64_t& magnitude) {
    std::string_view s = trim(text);
    negative = false;
    if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
        negative = s.front() == '-';
        s.remove_prefix(1);
    }
    if (s.empty()) return false;
    magnitude = 0;
    for (char c : s) {
        if (!is_digit(c)) return false;
        std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
        if (magnitude > (UINT64_MAX - digit) / 10) return false;
        magnitude = magnitude * 10 + digit;
    }
    return true;
}

KeyCheck check_integer(std::string_view type, std::string_view text, std::uint64_t max_positive) {
    bool negative = false;
    std::uint64_t magnitude = 0;
    std::string what = "not a valid " + std::string(type);
    if (!read_integer(text, negative, magnitude)) return refuse(what);
    if (magnitude == 0) negative = false;
    if (negative ? magnitude > max_positive + 1 : magnitude > max_positive)
        return refuse("out of range for " + std::string(type));
    return against(text, range_bound(negative, magnitude));
}

KeyCheck check_network(std::string_view type, std::string_view text) {
    bool cidr = type == "cidr";
    std::string form = cidr ? "a.b.c.d/n or an IPv6 address/n, host bits zero"
                            : "a.b.c.d[/n] or an IPv6 address[/n], /n only when not 32 (128)";
    KeyCheck generic = refuse("not in canonical form: write an " + std::string(type) + " as PostgreSQL prints it, " + form);
    auto slash = text.find('/');
    std::string_view address = text.substr(0, slash);
    std::array<std::uint8_t, 16> bytes{};
    bool v6 = address.find(':') != std::string_view::npos;
    if (v6 ? !read_ipv6(address, bytes) : !read_ipv4(address, bytes.data())) return generic;
    unsigned max_bits = v6 ? 128 : 32;
    unsigned bits = max_bits;
    if (slash != std::string_view::npos) {
        auto n = plain_number(text.substr(slash + 1), max_bits);
        if (!n) return generic;
        bits = *n;
    }
    if (cidr && !host_bits_zero(bytes.data(), v6 ? 16 : 4, bits))
        return refuse("not a valid cidr: it has bits set right of its mask /" + std::to_string(bits) +
                      " (PostgreSQL reads no such value)");
    std::string canonical = v6 ? print_ipv6(bytes) : dotted(bytes.data());
    if (cidr || bits != max_bits) {
        canonical += '/';
        canonical += std::to_string(bits);
    }
    return against(text, canonical);
}

KeyCheck check_macaddr(std::string_view type, std::string_view text) {
    std::size_t bytes = type == "macaddr8" ? 8 : 6;
    KeyCheck generic = refuse("not in canonical form: write a " + std::string(type) + " as PostgreSQL prints it, " +
                              (bytes == 8 ? "xx:xx:xx:xx:xx:xx:xx:xx" : "xx:xx:xx:xx:xx:xx") + " in lower case");
    std::string hex;
    std::size_t run = 0;
    for (char c : text) {
        if (hex_value(c) >= 0) {
            hex += lower(c);
            ++run;
        } else if ((c == ':' || c == '-' || c == '.') && run > 0 && run % 2 == 0) {
            run = 0;
        } else {
            return generic;
        }
    }
    if (run == 0 || run % 2 != 0) return generic;
    if (bytes == 8 && hex.size() == 12) hex.insert(6, "fffe");  // PostgreSQL reads 6 bytes as EUI-64
    if (hex.size() != bytes * 2) return generic;
    std::string canonical;
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        if (i) canonical += ':';
        canonical += hex.substr(i, 2);
    }
    return against(text, canonical);
}

KeyCheck check_bits(std::string_view base, std::size_t size, std::string_view text) {
    std::string type(base);
    if (size) {  // appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "(" + std::to_string(…)
        type += '(';
        type += std::to_string(size);
        type += ')';
    }
    std::string bits;
    char prefix = text.empty() ? '\0' : lower(text.front());
    if (prefix == 'x') {
        for (char c : text.substr(1)) {
            int h = hex_value(c);
            if (h < 0) return refuse("not a valid " + type + ": write it as PostgreSQL prints it, in 0s and 1s");
            for (int b = 3; b >= 0; --b) bits += (h >> b & 1) ? '1' : '0';
        }
    } else {
        for (char c : prefix == 'b' ? text.substr(1) : text) {
            if (c != '0' && c != '1') return refuse("not a valid " + type + ": write it as PostgreSQL prints it, in 0s and 1s");
            bits += c;
        }
    }
    if (size && base == "bit" && bits.size() != size)
        return refuse("not a valid " + type + ": " + std::to_string(bits.size()) + " bits, the type holds exactly " +
                      std::to_string(size) + " (PostgreSQL reads no such value)");
    if (size && base == "varbit" && bits.size() > size)
        return refuse("not a valid " + type + ": " + std::to_string(bits.size()) + " bits, the type holds at most " +
                      std::to_string(size) + " (PostgreSQL reads no such value)");
    return against(text, bits);
}

KeyCheck check_integer_range(std::string_view type, std::string_view text) {
    std::int64_t max = type == "int8range" ? INT64_MAX : INT32_MAX;
    std::int64_t min = type == "int8range" ? INT64_MIN : INT32_MIN;
    KeyCheck generic = refuse("not in canonical form: write an " + std::string(type) +
                              " as PostgreSQL prints it, [lower,upper) (a bound left out when unbounded: (,upper)) or empty");
    std::string_view s = trim(text);
    std::string lowered;
    for (char c : s) lowered += lower(c);
    if (lowered == "empty") return against(text, "empty");
    if (s.size() < 3 || (s.front() != '[' && s.front() != '(') || (s.back() != ']' && s.back() != ')')) return generic;
    std::string_view inner = s.substr(1, s.size() - 2);
    auto comma = inner.find(',');
    if (comma == std::string_view::npos || inner.find(',', comma + 1) != std::string_view::npos) return generic;
    std::optional<std::int64_t> lo, hi;
    std::string_view lo_text = inner.substr(0, comma), hi_text = inner.substr(comma + 1);
    if (!lo_text.empty() && !read_range_integer(lo_text, max, lo)) return generic;
    if (!hi_text.empty() && !read_range_integer(hi_text, max, hi)) return generic;
    if (lo && *lo < min) return generic;
    if (lo && hi && *lo > *hi)
        return refuse("not a valid " + std::string(type) + ": its lower bound is above its upper (PostgreSQL reads no such value)");
    // the discrete canonical form: lower inclusive, upper exclusive
    if (lo && s.front() == '(') {
        if (*lo == max) return refuse("out of range for " + std::string(type));
        lo = *lo + 1;
    }
    if (hi && s.back() == ']') {
        if (*hi == max) return refuse("out of range for " + std::string(type));
        hi = *hi + 1;
    }
    if (lo && hi && *lo >= *hi) return against(text, "empty");
    auto print = [](std::int64_t v) { return std::to_string(v); };
    std::string canonical = std::string(lo ? "[" : "(") + (lo ? print(*lo) : "") + "," + (hi ? print(*hi) : "") + ")";
    return against(text, canonical);
}

namespace {

// One element list of an array as array_out prints it, from `s` at `i` (a '{'), into `out` with
// each element's trailing spaces cut and quoted again as array_out quotes it; false when `s` is
// not in that form.
bool trim_array_level(std::string_view s, std::size_t& i, std::string& out) {
    if (i >= s.size() || s[i] != '{') return false;
    out += s[i++];
    if (i < s.size() && s[i] == '}') {
        out += s[i++];
        return true;
    }
    for (;;) {
        if (i >= s.size()) return false;
        if (s[i] == '{') {
            if (!trim_array_level(s, i, out)) return false;
        } else {
            std::string value;
            bool quoted = s[i] == '"';
            if (quoted) {
                for (++i;; ++i) {
                    if (i >= s.size()) return false;
                    if (s[i] == '"') break;
                    if (s[i] == '\\' && ++i >= s.size()) return false;
                    value += s[i];
                }
                ++i;
            } else {
                auto plain = [](char c) {
                    return c != ',' && c != '}' && c != '"' && c != '{' && c != '\\' && !is_space(c);
                };
                while (i < s.size() && plain(s[i])) value += s[i++];
                if (value.empty()) return false;
            }
            bool null = !quoted && value.size() == 4 && lower(value[0]) == 'n' && lower(value[1]) == 'u' &&
                        lower(value[2]) == 'l' && lower(value[3]) == 'l';
            if (null) {
                out += value;
            } else {
                value.erase(value.find_last_not_of(' ') + 1);  // npos + 1 == 0: blanks alone are empty
                std::string lowered;
                for (char c : value) lowered += lower(c);
                bool quote = value.empty() || lowered == "null";
                for (char c : value)
                    quote = quote || c == '"' || c == '\\' || c == '{' || c == '}' || c == ',' || is_space(c);
                if (quote) out += '"';
                for (char c : value) {
                    if (c == '"' || c == '\\') out += '\\';
                    out += c;
                }
                if (quote) out += '"';
            }
        }
        if (i >= s.size()) return false;
        char c = s[i++];
        out += c;
        if (c == '}') return true;
        if (c != ',') return false;
    }
}

}  // namespace

std::optional<std::string> trim_bpchar_array(std::string_view text) {
    std::size_t i = 0;
    std::string out;
    if (!text.empty() && text.front() == '[') {  // lower bounds other than 1: [0:1]={…}, kept as printed
        auto eq = text.find('=');
        if (eq == std::string_view::npos) return std::nullopt;
        out.assign(text.substr(0, eq + 1));
        i = eq + 1;
    }
    if (!trim_array_level(text, i, out) || i != text.size()) return std::nullopt;
    return out;
}

}  // namespace docsync::key_text_forms
