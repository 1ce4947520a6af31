// Fuzz target: a patch message as the gateway's hub receives it from Redis (docs/patches.md),
// against a doc it holds. The input is the held doc's JSON text, a NUL byte, then the message
// received on db:board:7. Nothing may crash; a message taken as a patch has a base older than its
// version and a patch inside it; applied, it either throws docsync::Error or gives a whole doc whose
// envelope reads back as docsync's envelope of the channel at the patch's version, with the
// patch's forms only when its envelope is the shorter.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/error.hpp"
#include "envelope/envelope.hpp"
#include "gateway/hub.hpp"
#include "gateway/patch_forms.hpp"

using namespace docsync;
using namespace docsync::gateway;

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

const std::string kChannel = "db:board:7";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view input(reinterpret_cast<const char*>(data), size);
    auto nul = input.find('\0');
    if (nul == std::string_view::npos) return 0;
    std::string message(input.substr(nul + 1));
    std::string why;
    bool shaped = looks_like_patch(message);
    DocPtr patch = make_patch(kChannel, message, why);
    if (!patch) {
        check(!why.empty());
        return 0;
    }
    check(shaped && patch->patch_only && patch->base && *patch->base < patch->version);
    check(patch->patch_at + patch->patch_size <= patch->patch_envelope.size());

    std::string held_text(input.substr(0, nul));
    DocPtr held;
    try {
        held = make_doc(kChannel, publish::make_envelope(kChannel, held_text, *patch->base));
    } catch (const Error&) {
        return 0;  // not a JSON doc: the hub never holds one
    }
    check(held != nullptr);
    DocPtr whole;
    try {
        whole = apply_patch(*held, *patch);
    } catch (const Error&) {
        return 0;
    }
    auto head = publish::parse_envelope(whole->envelope);
    check(head && head->channel == kChannel && head->version == patch->version);
    check(head->doc_at == whole->doc_at && head->doc_size == whole->doc_size);
    check(whole->version_text == format_version(patch->version));
    if (whole->base) {
        check(whole->patch_envelope == message && message.size() < whole->envelope.size());
        check(whole->patch_ws_message.rfind("{\"type\":\"patch\",\"version\":\"" + whole->version_text, 0) == 0);
    }
    return 0;
}
