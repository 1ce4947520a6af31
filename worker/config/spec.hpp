#pragma once
// The worker's settings table (not part of the worker's interface): one entry per setting, read by
// the readers every docsync program shares (settings/table.hpp) from the command line, the DOCSYNC_*
// environment variables and the config file, and shown by --help, so the four cannot disagree.

#include <vector>

#include "config/settings.hpp"
#include "settings/table.hpp"

namespace docsync::config {

using Spec = settings::Spec<Settings>;

// The settings, in --help order.
const std::vector<Spec>& specs();
// The worker as the readers see it: its name, its DOCSYNC_* variables (DOCSYNC_GATEWAY_* are the
// gateway's), the examples of its messages and the prose of its --help.
const settings::Program& program();

}  // namespace docsync::config
