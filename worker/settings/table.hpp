#pragma once
// A program's settings table and the readers every docsync program shares (the worker and the
// gateway): one entry per setting drives the command line, the environment variables, the JSON config
// file and --help, so the four cannot disagree, and every program reads its settings by the same rules:
//   --name VALUE, --name=VALUE, --switch, --switch=false; -h/--help and --version win over the rest
//   <PREFIX><NAME> variables (DOCSYNC_MAX_KEYS for "max-keys"); unknown ones are ignored
//   {"name": …} keys of the JSON file named by --config or <PREFIX>CONFIG; unknown keys are errors
//   precedence: flag > environment variable > config file > default
//   an invalid setting: exit status 2 and one line naming the setting, the value and the fix.
//
//   const std::vector<settings::Spec<MySettings>>& table = …;
//   auto parsed = settings::parse(program, table, argc, argv, envp);
//
// The readers know nothing of a program's settings struct S besides its table, whose entries read
// and show S's fields.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "settings/units.hpp"

namespace docsync::settings {

// How a setting's text is read; decides the JSON types its config key accepts. A List setting may be
// given several times; its values travel as one text, one value per line.
enum class Kind { Text, Flag, Size, Duration, Count, Choice, List };

// One setting of the settings struct S.
template <class S>
struct Spec {
    const char* name;        // long flag name without dashes; also the config key
    Kind kind;
    const char* value_name;  // shown in --help: SIZE, DURATION, N, …
    const char* help;        // one sentence
    std::string (*show_default)(const S&);
    void (*apply)(S&, std::string_view);  // throws SettingError; a List setting's apply adds one value
};

// What differs between programs besides their tables: the name their messages start with, their
// variables' prefix, the examples their messages give and the prose around --help's table.
struct Program {
    std::string_view name;        // "docsync-worker": starts every message, and --version's line
    std::string_view env_prefix;  // "DOCSYNC_": "max-keys" is DOCSYNC_MAX_KEYS
    // Variables of another program whose prefix extends this one ("DOCSYNC_GATEWAY_" for the worker):
    // skipped, so that one environment can hold both programs' settings without either reading the
    // other's. Empty: none.
    std::string_view foreign_env_prefix;
    std::string_view config_path_example;    // "/etc/docsync/docsync.json"
    std::string_view log_file_example;       // "/var/log/docsync/worker.log"
    std::string_view config_object_example;  // {"dsn": "…", "max-retained-wal": "1GB"}
    // A setting whose value holds spaces, quoted for a shell: --dsn 'host=/run/postgresql dbname=app'.
    std::string_view quoting_example;
    std::string_view help_intro;  // --help before the table: what the program is, its usage, a blank line
    std::string_view help_notes;  // --help after the table and a blank line: variables, config file, units
};

// A setting as the readers see it, whatever the settings struct.
struct Entry {
    std::string_view name;
    Kind kind;
    std::string_view value_name;
    std::string_view help;
    std::string shown_default;        // the default as --help shows it, in brackets
    bool default_reads_back = false;  // whether "--name <shown_default>" is a valid example for a message
};
using Table = std::vector<Entry>;

// One value of a setting, from the source that won, and that source for a message:
// --pool "4", DOCSYNC_POOL="4" or config file "/etc/docsync/docsync.json": "pool": "4".
struct Given {
    std::string value;
    std::string source;
};

// The command line, the environment and the config file read against a table.
struct Gathered {
    bool help = false;     // -h or --help was given
    bool version = false;  // --version was given
    std::string error;     // the first problem, one line, without the program name
    // Per setting, in table order: the values of the source that wins (empty: given nowhere), and
    // whether a source gave it at all.
    std::vector<std::vector<Given>> values;
    std::vector<bool> given;
};

// The sources of settings, by precedence. A config file that cannot be read or holds an unknown key is
// an error; unknown variables under program.env_prefix are ignored (other tools share the prefix).
Gathered gather(const Program& program, const Table& table, const std::vector<std::string>& args,
                const char* const* envp);

// The full --help text: program.help_intro, the table with its defaults, program.help_notes.
std::string help_text(const Program& program, const Table& table);
// --version's line: "docsync-worker 0.1.0\n".
std::string version_text(const Program& program);

// The setting named `name` (a long flag name without dashes), or nullptr.
const Entry* find(const Table& table, std::string_view name);
// The setting whose name is closest to `key` (a typo, underscores for dashes), or nullptr.
const Entry* closest(const Table& table, std::string_view key);
// "; did you mean "max-retained-wal"?" when a known setting is close, else the pointer to --help.
std::string suggestion(const Program& program, const Table& table, std::string_view key);
// A setting's environment variable: "max-retained-wal" is DOCSYNC_MAX_RETAINED_WAL.
std::string env_name(const Program& program, std::string_view name);

// The config file's text; throws SettingError naming the file when it cannot be read or is larger
// than 1MB.
std::string read_config_file(const Program& program, const std::string& path);
// A JSON config file's text as (key, value-as-setting-text) pairs, keys checked against the table and
// JSON types against their kinds. `origin` names the file in messages. Throws SettingError with a
// complete message.
std::vector<std::pair<std::string, std::string>> parse_config_text(const Program& program, const Table& table,
                                                                   std::string_view json, std::string_view origin);

// What a program's main does with its command line: run with `settings`, or print `output` (to
// stdout: --help, --version) or `error` (to stderr: one line naming the setting and the fix) and exit.
template <class S>
struct Parsed {
    bool run = false;
    int exit_code = 0;   // when !run: 0 after --help/--version, 2 for invalid settings
    std::string output;  // text for stdout
    std::string error;   // one line for stderr (no trailing newline)
    S settings;
    // The settings given by a flag, a variable or a config key rather than defaulted.
    std::vector<std::string> given;
    bool was_given(std::string_view name) const {
        for (const auto& n : given)
            if (n == name) return true;
        return false;
    }
};

// Invalid settings: exit status 2 and `message` after the program's name.
template <class S>
Parsed<S> failure(const Program& program, std::string_view message) {
    Parsed<S> result;
    result.exit_code = 2;
    result.error = std::string(program.name) + ": " + std::string(message);
    return result;
}

// The table as the readers see it: names, kinds and help, with the defaults of a default S shown.
template <class S>
Table table_of(const std::vector<Spec<S>>& specs) {
    const S defaults{};
    Table table;
    table.reserve(specs.size());
    for (const auto& spec : specs) {
        Entry entry{spec.name, spec.kind, spec.value_name, spec.help, spec.show_default(defaults)};
        // A message may give "--pool 4" as the example when the default reads back as a value;
        // "the value of --pool" does not.
        if (spec.kind == Kind::Size || spec.kind == Kind::Duration || spec.kind == Kind::Count ||
            spec.kind == Kind::Choice) {
            S probe;
            try {
                spec.apply(probe, entry.shown_default);
                entry.default_reads_back = true;
            } catch (const SettingError&) {
            }
        }
        table.push_back(std::move(entry));
    }
    return table;
}

// Reads the settings of `specs` from argv (argv[0] is the program's name), envp (a null-terminated
// array of "NAME=value", as environ; may be null) and the config file, and applies them to a default S
// by precedence. Touches no global state besides reading the config file.
template <class S>
Parsed<S> parse(const Program& program, const std::vector<Spec<S>>& specs, int argc, const char* const* argv,
                const char* const* envp) {
    const Table table = table_of(specs);
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i] ? argv[i] : "");
    Gathered gathered = gather(program, table, args, envp);
    Parsed<S> result;
    if (gathered.help || gathered.version) {
        result.output = gathered.help ? help_text(program, table) : version_text(program);
        return result;
    }
    if (!gathered.error.empty()) return failure<S>(program, gathered.error);
    result.run = true;
    for (std::size_t i = 0; i < specs.size(); ++i) {
        for (const auto& [value, source] : gathered.values[i]) {
            try {
                specs[i].apply(result.settings, value);
            } catch (const SettingError& e) {
                return failure<S>(program, source + ": " + e.what());
            }
        }
        if (gathered.given[i]) result.given.emplace_back(specs[i].name);
    }
    return result;
}

}  // namespace docsync::settings
