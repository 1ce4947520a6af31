// The settings watch: database and role defaults and the configuration's values of the settings a
// doc query's result depends on and docsync does not pin.
#include "executor/settings_watch.hpp"

#include "common/error.hpp"

namespace docsync {

const std::vector<std::string_view> kFollowedSettings = {
    "array_nulls",           "default_text_search_config",  "gin_fuzzy_search_limit",
    "lc_monetary",           "lc_numeric",                  "lc_time",
    "quote_all_identifiers", "standard_conforming_strings", "timezone_abbreviations",
    "transform_null_equals", "xmlbinary",                   "xmloption",
};

namespace {

// Every row of pg_db_role_setting that a session of this database may take defaults from (any role:
// the pool's login role and the roles it computes as), in a stable order; then each followed
// setting's value in this session.
constexpr const char* kDefaultsSql =
    "SELECT coalesce(pg_catalog.string_agg(s.setdatabase::text || ' ' || s.setrole::text || ' ' ||"
    " pg_catalog.array_to_string(s.setconfig, ' '), E'\\n' ORDER BY s.setdatabase, s.setrole), '')"
    " FROM pg_catalog.pg_db_role_setting s WHERE s.setdatabase = 0 OR s.setdatabase ="
    " (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())";

// Each followed setting's value in this session, in the order of kFollowedSettings.
std::string values_sql() {
    std::string sql = "SELECT pg_catalog.current_setting(n) FROM pg_catalog.unnest(ARRAY[";
    for (std::size_t i = 0; i < kFollowedSettings.size(); ++i)
        sql += (i ? ", '" : "'") + std::string(kFollowedSettings[i]) + "'";
    return sql + "]::text[]) WITH ORDINALITY AS u(n, i) ORDER BY i";
}

const std::string kValuesSql = values_sql();

}  // namespace

SettingsWatch::SettingsWatch(std::string pool_dsn, std::chrono::milliseconds timeout)
    : dsn_(std::move(pool_dsn)), timeout_(timeout) {}

std::optional<std::string> SettingsWatch::changed() {
    bool fresh = false;
    if (!conn_ || !conn_->ok()) {
        conn_.reset();
        conn_.emplace(pg::Connection::connect(dsn_, pg::deadline_in(timeout_),
                                              {{"application_name", "docsync-worker settings watch"}}, "--pool-dsn"));
        fresh = true;
    }
    std::string defaults;
    std::vector<std::string> values;
    try {
        defaults = std::string(conn_->exec(kDefaultsSql, pg::deadline_in(timeout_)).get(0, 0));
        auto r = conn_->exec(kValuesSql, pg::deadline_in(timeout_));
        for (int i = 0; i < r.rows(); ++i) values.emplace_back(r.get(i, 0));
    } catch (const Error&) {
        conn_.reset();
        throw;
    }
    // The defaults are the server's (compared across reconnects); the values are this session's
    // (compared within one session: a new session takes the defaults anew).
    std::optional<std::string> what;
    if (seen_ && defaults != defaults_)
        what = "the database or role defaults of settings changed (ALTER DATABASE or ALTER ROLE … SET)";
    if (!fresh && values_.size() == values.size())
        for (std::size_t i = 0; i < values.size(); ++i)
            if (values[i] != values_[i])
                what = (what ? *what + "; " : std::string()) + std::string(kFollowedSettings[i]) + " is now '" +
                       values[i] + "' (was '" + values_[i] + "': the configuration was reloaded)";
    seen_ = true;
    defaults_ = std::move(defaults);
    values_ = std::move(values);
    return what;
}

}  // namespace docsync
