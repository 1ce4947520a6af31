#pragma once
// Whether a doc query's value is one valid JSON document (RapidJSON's validating reader).

#include <string_view>

namespace docsync {

bool valid_json(std::string_view text);

}  // namespace docsync
