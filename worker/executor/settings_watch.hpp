#pragma once
// The settings watch: the server settings a doc query's result depends on that docsync does not
// pin (docs/design.md, "pinned and followed settings").
//
// The pool pins the text forms of values on every connection (pg::pin_text_forms: client_encoding,
// TimeZone, DateStyle, IntervalStyle, extra_float_digits, bytea_output) and each compute sets its
// query's stored search_path. Every other setting that changes what a query returns is followed
// from the server, as a fresh session gets it: `default_text_search_config` (to_tsvector(text)),
// `lc_monetary`, `lc_numeric`, `lc_time` (to_char, money), `xmloption`, `xmlbinary`,
// `standard_conforming_strings`, `array_nulls`, `transform_null_equals`, `quote_all_identifiers`,
// `timezone_abbreviations`, `gin_fuzzy_search_limit` (kFollowedSettings). A session takes them from
// the configuration file and from the database and role defaults (ALTER DATABASE / ALTER ROLE …
// SET, pg_db_role_setting) when it starts, and no event trigger fires when those change. So the
// watch reads, once a second on a connection of its own, every row of pg_db_role_setting of this
// database and of all databases, and its own session's values of the followed settings (which
// change only when the configuration is reloaded); when either changed, the caller renews the
// pool's sessions (Executor::renew_sessions) and recomputes every live doc.
//
// Threads: one caller at a time (the worker's settings thread).

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pg/connection.hpp"

namespace docsync {

// The followed settings, one home: the watch reads them and docs/design.md lists them.
extern const std::vector<std::string_view> kFollowedSettings;

class SettingsWatch {
public:
    SettingsWatch(std::string pool_dsn, std::chrono::milliseconds timeout);

    // What changed since the last call (for the log line), or nullopt; the first call (and the first
    // after a lost connection) only takes note. Throws docsync::Error when the server cannot be asked.
    std::optional<std::string> changed();

private:
    std::string dsn_;
    std::chrono::milliseconds timeout_;
    std::optional<pg::Connection> conn_;
    bool seen_ = false;                     // a first call took note
    std::string defaults_;                  // pg_db_role_setting, one line per row
    std::vector<std::string> values_;       // the followed settings' values, as kFollowedSettings
};

}  // namespace docsync
