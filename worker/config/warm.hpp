#pragma once
// The --warm channels checked against the definitions at start: the settings reader checks each is
// a doc channel, but only the definitions say whether its doc query exists and how many values it
// takes.

#include <string>
#include <vector>

#include "engine/definitions.hpp"

namespace docsync {

// Throws docsync::Error naming the first channel that is not a doc channel, names no defined doc
// query (listing the defined ones), or gives the wrong number of values for its query, with the fix.
void check_warm(const std::vector<std::string>& channels, const Definitions& definitions);

}  // namespace docsync
