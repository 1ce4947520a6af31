#pragma once
// Checks of what the executor sends and receives: a doc query's value is one valid JSON document
// (RapidJSON's validating reader, iterative, so nesting depth cannot overflow the stack), and a stored
// doc or keys query starts as a SELECT.

#include <string_view>

namespace docsync {

bool valid_json(std::string_view text);

// Whether the statement's first keyword, after white space, comments and opening parentheses, is
// SELECT, WITH, VALUES or TABLE. Data-modifying WITH clauses are refused by the read-only transaction.
bool looks_like_select(std::string_view sql);

}  // namespace docsync
