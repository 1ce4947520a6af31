#pragma once
// JSON token scanning (RFC 8259) shared by the envelope Compactor and the patch span-tree parser: the
// end of a number, of a string (escapes checked, UTF-8 optionally), a literal, and UTF-8 encoding.
// Each scanner advances `i` past one token or returns an error with `i` at the byte to report; the
// caller words the error (the two parsers word theirs differently). Header-only and branch-cheap: these
// run per byte of every doc.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace docsync::json_scan {

enum class ScanError : unsigned char {
    None,
    Digit,               // a number without its integer digits
    DigitAfterDot,       // "1."
    DigitInExponent,     // "1e", "1e+"
    Unterminated,        // the text ends inside a string; `i` at the end
    UnterminatedEscape,  // the text ends right after a backslash; `i` at the backslash
    ControlCharacter,    // an unescaped byte below 0x20; `i` at it
    ShortUnicodeEscape,  // \u with fewer than four bytes left; `i` at the backslash
    BadUnicodeEscape,    // \u with a non-hex digit among the four; `i` at the backslash
    BadEscape,           // a backslash before anything else; `i` at the backslash
    BadUtf8,             // an invalid multi-byte sequence; `i` at its lead byte
};

inline bool digit_at(std::string_view in, std::size_t i) {
    return i < in.size() && in[i] >= '0' && in[i] <= '9';
}
inline bool char_at(std::string_view in, std::size_t i, char c) { return i < in.size() && in[i] == c; }

// A number starting at `i` ('-' or a digit).
inline ScanError number(std::string_view in, std::size_t& i) {
    if (char_at(in, i, '-')) ++i;
    if (char_at(in, i, '0')) {
        ++i;
    } else if (digit_at(in, i)) {
        while (digit_at(in, i)) ++i;
    } else {
        return ScanError::Digit;
    }
    if (char_at(in, i, '.')) {
        ++i;
        if (!digit_at(in, i)) return ScanError::DigitAfterDot;
        while (digit_at(in, i)) ++i;
    }
    if (char_at(in, i, 'e') || char_at(in, i, 'E')) {
        ++i;
        if (char_at(in, i, '+') || char_at(in, i, '-')) ++i;
        if (!digit_at(in, i)) return ScanError::DigitInExponent;
        while (digit_at(in, i)) ++i;
    }
    return ScanError::None;
}

// Both parsers word a bad number alike.
inline const char* number_error_text(ScanError e) {
    switch (e) {
        case ScanError::DigitAfterDot:
            return "expected a digit after '.'";
        case ScanError::DigitInExponent:
            return "expected a digit in the exponent";
        default:
            return "expected a digit";
    }
}

enum class Literal : unsigned char { None, True, False, Null };

// Which literal starts at `i`, if any.
inline Literal literal(std::string_view in, std::size_t i) {
    if (in.substr(i, 4) == "true") return Literal::True;
    if (in.substr(i, 5) == "false") return Literal::False;
    if (in.substr(i, 4) == "null") return Literal::Null;
    return Literal::None;
}
inline std::size_t literal_size(Literal l) { return l == Literal::False ? 5 : l == Literal::None ? 0 : 4; }

// The length of a valid multi-byte UTF-8 sequence at `i` (no overlong forms, no surrogates, nothing
// above U+10FFFF), or 0.
inline std::size_t utf8_sequence(std::string_view in, std::size_t i) {
    auto lead = static_cast<unsigned char>(in[i]);
    std::size_t extra;
    std::uint32_t cp, min;
    if (lead >= 0xC2 && lead <= 0xDF) {
        extra = 1, cp = lead & 0x1F, min = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        extra = 2, cp = lead & 0x0F, min = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        extra = 3, cp = lead & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (std::size_t k = 1; k <= extra; ++k) {
        if (i + k >= in.size()) return 0;
        auto b = static_cast<unsigned char>(in[i + k]);
        if ((b & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return extra + 1;
}

struct StringScan {
    ScanError error = ScanError::None;
    bool escaped = false;  // the string holds a backslash escape (it needs decoding)
};

// A string starting at `i` (its opening quote); on success `i` is past the closing quote. With
// kValidateUtf8, bytes of 0x80 and above must form valid UTF-8; without, they pass as they are.
template <bool kValidateUtf8>
inline StringScan string(std::string_view in, std::size_t& i) {
    StringScan r;
    ++i;
    const char* const base = in.data();
    const char* const end = base + in.size();
    for (;;) {
        // The common run of plain bytes first, in a tight loop.
        const char* p = base + i;
        while (p < end && *p != '"' && *p != '\\' && static_cast<unsigned char>(*p) >= 0x20 &&
               (!kValidateUtf8 || static_cast<unsigned char>(*p) < 0x80))
            ++p;
        i = static_cast<std::size_t>(p - base);
        if (i >= in.size()) return r.error = ScanError::Unterminated, r;
        auto c = static_cast<unsigned char>(in[i]);
        if (c == '"') {
            ++i;
            return r;
        }
        if (c < 0x20) return r.error = ScanError::ControlCharacter, r;
        if (c != '\\') {  // only with kValidateUtf8: a multi-byte sequence
            std::size_t n = utf8_sequence(in, i);
            if (n == 0) return r.error = ScanError::BadUtf8, r;
            i += n;
            continue;
        }
        r.escaped = true;
        if (i + 1 >= in.size()) return r.error = ScanError::UnterminatedEscape, r;
        char e = in[i + 1];
        if (e == 'u') {
            if (i + 6 > in.size()) return r.error = ScanError::ShortUnicodeEscape, r;
            for (std::size_t k = i + 2; k < i + 6; ++k)
                if (!std::isxdigit(static_cast<unsigned char>(in[k])))
                    return r.error = ScanError::BadUnicodeEscape, r;
            i += 6;
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                   e == 't') {
            i += 2;
        } else {
            return r.error = ScanError::BadEscape, r;
        }
    }
}

// Appends code point `cp` (at most U+10FFFF, not a surrogate) as UTF-8.
inline void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

}  // namespace docsync::json_scan
