#pragma once
// Each form of patch that diff() chooses between, on parsed texts (for the tests, which check both).

#include <optional>
#include <string>

#include "patch/json_tree.hpp"

namespace docsync::patch {

// The RFC 6902 patch from `from` to `to`; nullopt when the root is an object with a key twice.
std::optional<std::string> json_patch_between(const Tree& from, const Tree& to);

// The RFC 7386 merge patch from `from` to `to`; nullopt when none gives `to` byte for byte (`to` is
// not an object, a value it sets is or holds a null member, a key moves or repeats, ...).
std::optional<std::string> merge_patch_between(const Tree& from, const Tree& to);

}  // namespace docsync::patch
