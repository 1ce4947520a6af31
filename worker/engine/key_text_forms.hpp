#pragma once
// The canonical text of key types beyond the scalar ones key_text.cpp checks: network addresses
// (inet, cidr, macaddr, macaddr8), bit strings (bit, varbit, and their sizes from a domain:
// "bit(3)", "varbit(8)") and the integer ranges (int4range, int8range). Each accepts exactly the
// text PostgreSQL prints for a value and refuses every other spelling; when the value is one
// PostgreSQL reads the same way, the refusal names its printed text (KeyCheck::canonical).
// Internal to the engine: key_text.hpp is the interface, and its rules are in docs/design.md
// ("one doc, one name, one answer").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/key_text.hpp"

namespace docsync::key_text_forms {

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

inline KeyCheck refuse(std::string problem) { return KeyCheck{false, std::move(problem)}; }

// `text` against its canonical spelling `canonical`.
inline KeyCheck against(std::string_view text, const std::string& canonical) {
    if (text == canonical) return {};
    KeyCheck check = refuse("not in canonical form: the same value is spelled \"" + canonical + "\"");
    check.canonical = canonical;
    return check;
}

// An integer as PostgreSQL reads one (whitespace around it, a sign, decimal digits), as its sign and
// magnitude; false when it is not one or its magnitude passes 2^64-1.
bool read_integer(std::string_view text, bool& negative, std::uint64_t& magnitude);

// int2, int4, int8: `max_positive` is the type's largest value.
KeyCheck check_integer(std::string_view type, std::string_view text, std::uint64_t max_positive);

// inet and cidr ("inet" or "cidr").
KeyCheck check_network(std::string_view type, std::string_view text);

// macaddr (6 bytes) and macaddr8 (8 bytes; PostgreSQL also reads 6, adding ff:fe in the middle).
KeyCheck check_macaddr(std::string_view type, std::string_view text);

// bit and varbit ("bit", "varbit"): `size` is the domain's length, 0 for none (a bit param without
// a domain reads any length; bit(n) exactly n, varbit(n) at most n).
KeyCheck check_bits(std::string_view base, std::size_t size, std::string_view text);

// int4range, int8range: PostgreSQL prints a discrete range as [lower,upper) or empty.
KeyCheck check_integer_range(std::string_view type, std::string_view text);

// bpchar[] ("_bpchar") as array_out prints it ({FR,"FR ",NULL}, with [l:u]= bounds when not 1):
// the same array with each element's trailing spaces cut ({FR,FR,NULL}), quoted as array_out
// quotes it; nullopt when `text` is not in that form. A bpchar[] key read from data (a change's
// char(3)[] column) names the channel the server check accepts, which prints $n::text[].
std::optional<std::string> trim_bpchar_array(std::string_view text);

}  // namespace docsync::key_text_forms
