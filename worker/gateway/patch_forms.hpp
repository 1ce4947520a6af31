#pragma once
// Patch envelopes at the gateway (docs/patches.md): recognising one among the messages of a
// channel, and turning it, with the whole doc of its base version, into the next whole Doc that
// also carries the patch's forms for the clients that hold the base.
//
//   {"channel":"db:board:7","patch":[…],"base_generation":3,"base_lsn":"0/16B3E00","generation":3,"lsn":"0/16B3F28"}
//   {"channel":"db:board:7","merge":{…},"base_generation":3,"base_lsn":"0/16B3E00","generation":3,"lsn":"0/16B3F28"}
//
// Parsing runs on the feed's subscriber thread (Hub::receive); applying on the hub's thread, once
// per publish whatever the number of clients.

#include <optional>
#include <string>
#include <string_view>

#include "gateway/hub.hpp"

namespace docsync::gateway {

// Whether `text` is shaped as a patch envelope ("patch" or "merge" right after the channel),
// without validating it: a whole doc's envelope is never mistaken for one.
bool looks_like_patch(std::string_view text);

// The Doc of a patch envelope received for `channel`, not applied yet (Doc::patch_only): its
// version, its base and where the patch lies in the envelope. nullptr when it is not a valid patch
// envelope of that channel (not one JSON value, a field missing or out of place, a base not older
// than the version); `why` then says what is wrong.
DocPtr make_patch(const std::string& channel, std::string envelope, std::string& why);

// The whole Doc `incoming` (a patch_only Doc) makes of `base` (a whole doc at incoming's base
// version): the patch applied to base's doc text byte for byte (docsync::patch::apply), the
// envelope rebuilt around it, and the patch's forms kept for the clients that hold the base.
// Throws docsync::Error when the patch does not apply.
DocPtr apply_patch(const Doc& base, const Doc& incoming);

}  // namespace docsync::gateway
