// Fuzz target: the canonical key text of a channel's key (engine/key_text.hpp), which the worker and
// the gateway apply to keys from outside (warm, touch, liveness polls, clients), and the key types
// list the gateway reads from Redis. Input: a type name, a NUL byte, the key text. A spelling it
// names as canonical must itself be accepted, and accepted text must be left as it is; a key read
// from data put in its channel's spelling (canonical_key: a char(n)'s trailing spaces cut, a
// bpchar[]'s elements trimmed) stays as it is when put so again.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/key_text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);
    std::map<std::string, std::vector<std::string>> types;
    (void)docsync::parse_key_types_json(input, types);
    auto nul = input.find('\0');
    if (nul == std::string_view::npos) return 0;
    std::string_view type = input.substr(0, nul), text = input.substr(nul + 1);
    std::vector<std::string> key_types = {std::string(type)};
    docsync::SqlArgs once = docsync::canonical_key(key_types, {std::string(text)});
    if (docsync::canonical_key(key_types, once) != once) __builtin_trap();
    docsync::KeyCheck check = docsync::check_key_text(type, text);
    // a refusal that names a spelling carries it (a canonical value may hold a '"' itself; a type
    // name holding one may be quoted in the message, so only plain type names are judged by it)
    bool names = check.problem.find("spelled \"") != std::string::npos;
    if (type.find('"') == std::string_view::npos && names != check.canonical.has_value()) __builtin_trap();
    if (check.ok || !check.canonical) return 0;
    const std::string& canonical = *check.canonical;
    if (canonical == text || !docsync::check_key_text(type, canonical).ok) __builtin_trap();
    return 0;
}
