#pragma once
// The batched forms' plumbing the executor uses (executor.cpp): the params of a batched statement, its
// rows by ordinal, and when and why a form that failed is set aside.

#include <string>
#include <vector>

#include "engine/seams.hpp"
#include "pg/connection.hpp"

namespace docsync::batch_forms {

// The params of a batched statement (DocQuery::batch_sql): the k-th is the array of every param
// set's k-th value, in text form (pg::text_array).
SqlArgs batch_params(const std::vector<SqlArgs>& args);

// The rows of a batched statement's result for each of `count` param sets: its columns are the
// ordinal (from 1), `present` (NULL: the query returned no row for that set) and the query's own.
// Empty when the result is not shaped so.
std::vector<std::vector<int>> rows_by_ordinal(const pg::Result& r, std::size_t count);

// Whether a batched statement's failure may be the batched form's own: a syntax or semantic error
// (it cannot express the query, say LIMIT $1), or a missing privilege (the form names each param's
// type, which needs USAGE on the type's schema; the query alone, its types inferred, does not).
bool form_may_be_at_fault(const std::string& sqlstate);

// Why a batched form was set aside (it failed where each doc alone ran) and what lifts it, as
// docsync.queries shows it: the remedy first, since the status file keeps DOCSYNC_STATUS_ERROR_LEN
// bytes of it, then the server's message without its "ERROR:" and LINE context.
std::string set_aside_reason(const std::string& what, const std::string& error, const std::string& sqlstate);

}  // namespace docsync::batch_forms
