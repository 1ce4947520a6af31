#pragma once
// A portable install's runners (sql/portable/26_runner.sql): there a compute's statement runs inside
// its reader role's SECURITY DEFINER function docsync_run.<reader>(stmt, args), where the server
// refuses any change of role, and each row comes back as its record's text.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/seams.hpp"
#include "pg/connection.hpp"

namespace docsync::runner {

// The call of `reader_role`'s runner: $1 is the statement, $2 its params (call_params).
std::string call(const std::string& reader_role);
pg::Params call_params(const std::string& sql, const SqlArgs& args);

// The fields of a record's text (record_out): NULL as nullopt. nullopt for a malformed text.
std::optional<std::vector<std::optional<std::string>>> record_fields(std::string_view text);

// The runner's result (a row of one text column per row of the statement) as the statement's own:
// one column per field, every value text. Throws docsync::Error when a row is malformed or the rows
// have different numbers of fields.
pg::Result unpack(const pg::Result& rows);

}  // namespace docsync::runner
