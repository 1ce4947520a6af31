// The worker's settings: its table (settings_table.cpp) read by the readers every docsync program
// shares (settings/table.hpp), and the rules between settings only the worker has.
#include "config/settings.hpp"

#include "config/spec.hpp"
#include "settings/log_settings.hpp"

namespace docsync {

ParsedSettings parse_settings(int argc, const char* const* argv, const char* const* envp) {
    ParsedSettings parsed = settings::parse(config::program(), config::specs(), argc, argv, envp);
    if (!parsed.run) return parsed;
    Settings& s = parsed.settings;
    if (!parsed.was_given("threads")) s.threads = s.pool;
    if (s.dsn.empty())
        return settings::failure<Settings>(
            config::program(),
            "--dsn is required: give the connection string of a role with REPLICATION, e.g. --dsn "
            "'host=/run/postgresql dbname=app user=docsync_repl' (or DOCSYNC_DSN, or \"dsn\" in the config file)");
    if (s.pool_dsn.empty())
        return settings::failure<Settings>(
            config::program(),
            "--pool-dsn is required: give the connection string of the SELECT-only reader role, e.g. "
            "--pool-dsn 'host=/run/postgresql dbname=app user=docsync_reader' (or DOCSYNC_POOL_DSN, or "
            "\"pool-dsn\" in the config file)");
    return parsed;
}

std::string apply_log_settings(const Settings& s) {
    return settings::apply_log_settings(config::program(), s.log_format, s.log_file, s.log_level);
}

std::string settings_help() { return settings::help_text(config::program(), settings::table_of(config::specs())); }

std::vector<std::pair<std::string, std::string>> parse_config_text(std::string_view json, std::string_view origin) {
    return settings::parse_config_text(config::program(), settings::table_of(config::specs()), json, origin);
}

}  // namespace docsync
