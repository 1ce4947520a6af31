// The worker's settings: one table of settings drives the command line, the JSON config file
// (RapidJSON), the DOCSYNC_* environment variables and --help, so the four cannot disagree.
#include "config/settings.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>

#include "engine/channel.hpp"

namespace docsync {

namespace {

constexpr std::string_view program = "docsync-worker";
constexpr std::uint64_t kB = 1024;
constexpr std::uint64_t MB = kB * 1024;
constexpr std::uint64_t GB = MB * 1024;
constexpr std::uint64_t TB = GB * 1024;
constexpr std::size_t max_config_bytes = 1 << 20;

// How a setting's text is read; decides the JSON types its config key accepts. A List setting may be
// given several times; its values travel as one text, one value per line.
enum class Kind { Text, Flag, Size, Duration, Count, Choice, List };

struct Spec {
    const char* name;        // long flag name without dashes; also the config key
    Kind kind;
    const char* value_name;  // shown in --help: SIZE, DURATION, N, …
    const char* help;        // one sentence
    std::string (*show_default)(const Settings&);
    void (*apply)(Settings&, std::string_view);  // a List setting's apply adds one value
};

std::string lower(std::string_view text) {
    std::string out(text);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    return text;
}

// Splits "16 MB" into its leading digits and the rest (trimmed, as written). Throws when there are no
// digits; `unit` says whether the number takes a unit, for the fix.
std::pair<std::uint64_t, std::string> split_number(std::string_view text, const char* what, const char* example,
                                                   bool unit) {
    text = trim(text);
    std::size_t i = 0;
    std::uint64_t value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
        auto digit = static_cast<std::uint64_t>(text[i] - '0');
        if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10)
            throw SettingError(std::string("number too large; give a smaller ") + what + ", e.g. " + example);
        value = value * 10 + digit;
        ++i;
    }
    if (i == 0) {
        if (!text.empty() && (text[0] == '-' || text[0] == '+'))
            throw SettingError(std::string("not a ") + what + ": no sign allowed; give e.g. " + example);
        if (!unit) throw SettingError(std::string("not a ") + what + "; give digits only, e.g. " + example);
        throw SettingError(std::string("not a ") + what + "; give a whole number with a unit, e.g. " + example);
    }
    if (i < text.size() && text[i] == '.')
        throw SettingError(std::string("not a ") + what + ": use a whole number with a smaller unit, e.g. " + example);
    return {value, std::string(trim(text.substr(i)))};
}

std::uint64_t checked_multiply(std::uint64_t value, std::uint64_t unit, const char* what, const char* example) {
    if (value != 0 && unit > std::numeric_limits<std::uint64_t>::max() / value)
        throw SettingError(std::string(what) + " too large; give a smaller one, e.g. " + example);
    return value * unit;
}

std::string quote_text(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(c);
        } else if (u < 0x20 || u == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        } else {
            out.push_back(c);
        }
    }
    out.push_back('"');
    return out;
}

// --- per-setting readers: each throws SettingError saying what is wrong and the fix ---

void require_range(std::uint64_t value, std::uint64_t min, std::uint64_t max, const std::string& shown_min,
                   const std::string& shown_max) {
    if (value < min || value > max)
        throw SettingError("out of range; give a value from " + shown_min + " to " + shown_max);
}

std::uint64_t size_in(std::string_view text, std::uint64_t min, std::uint64_t max) {
    auto value = parse_size(text);
    require_range(value, min, max, format_size(min), format_size(max));
    return value;
}

std::chrono::milliseconds duration_in(std::string_view text, std::chrono::milliseconds min,
                                      std::chrono::milliseconds max) {
    auto value = parse_duration(text);
    if (value < min || value > max)
        throw SettingError("out of range; give a duration from " + format_duration(min) + " to " + format_duration(max));
    return value;
}

std::uint64_t count_in(std::string_view text, std::uint64_t min, std::uint64_t max) {
    auto value = parse_count(text);
    require_range(value, min, max, std::to_string(min), std::to_string(max));
    return value;
}

std::string non_empty(std::string_view text, const char* example) {
    if (trim(text).empty()) throw SettingError(std::string("must not be empty; give e.g. ") + example);
    return std::string(text);
}

std::string connection_string(std::string_view text, const char* example) {
    std::string value = non_empty(text, example);
    char* err = nullptr;
    std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(PQconninfoParse(value.c_str(), &err),
                                                                          &PQconninfoFree);
    if (!options) {
        std::string message = err ? err : "out of memory";
        if (err) PQfreemem(err);
        while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
        throw SettingError("not a libpq connection string (" + message + "); give e.g. " + example);
    }
    return value;
}

std::string sink_spec(std::string_view text) {
    std::string value(trim(text));
    const char* fix = "; give stdout, file:/path/docs.jsonl or redis://127.0.0.1:6379";
    if (value == "stdout") return value;
    if (value.rfind("file:", 0) == 0) {
        if (value.size() == 5) throw SettingError(std::string("file sink without a path") + fix);
        return value;
    }
    if (value.rfind("redis://", 0) == 0) {
        if (value.size() == 8) throw SettingError(std::string("redis sink without a host") + fix);
        return value;
    }
    throw SettingError(std::string("unknown sink") + fix);
}

std::string slot_name(std::string_view text) {
    std::string value(text);
    bool ok = !value.empty() && value.size() <= 63;
    for (char c : value)
        if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
            ok = false;
    if (!ok)
        throw SettingError("not a slot name; use 1 to 63 lower case letters, digits and underscores, e.g. docsync");
    return value;
}

LogLevel log_level(std::string_view text) {
    auto value = lower(trim(text));
    if (value == "debug") return LogLevel::Debug;
    if (value == "info") return LogLevel::Info;
    if (value == "warning" || value == "warn") return LogLevel::Warning;
    if (value == "error") return LogLevel::Error;
    throw SettingError("unknown log level; give debug, info, warning or error");
}

// A doc to compute at start: its channel, exactly as docsync.channel() spells it. A pattern cannot be
// resolved: the definitions say how changed rows name docs, not which docs exist.
std::string warm_channel(std::string_view text) {
    std::string value(trim(text));
    std::string query = "post";
    if (value.rfind("db:", 0) == 0) {
        auto end = value.find(':', 3);
        std::string name = value.substr(3, end == std::string::npos ? std::string::npos : end - 3);
        if (!name.empty() && name.find('*') == std::string::npos) query = name;
    }
    if (value.find('*') != std::string::npos)
        throw SettingError("a pattern cannot be warmed: docsync cannot list which docs of a query exist (its params "
                           "take any values); give one --warm per doc, with its channel, e.g. --warm db:" + query +
                           ":42 (psql -Atc \"SELECT docsync.channel('" + query + "', id::text) FROM …\" lists them)");
    ParsedChannel parsed;
    if (value.rfind("db:", 0) != 0 || !parse_channel(value, parsed))
        throw SettingError("not a doc channel; give db:<query>:<value>…, spelled as docsync.channel() spells it "
                           "(':' and '%' in a value are %3A and %25), e.g. db:order:42");
    return value;
}


std::string show_text(const std::string& value) { return value.empty() ? "(none)" : value; }

// The settings, in --help order. Ranges are wide: they reject values that cannot work, not
// unusual ones.
const std::vector<Spec>& specs() {
    static const std::vector<Spec> table = {
        {"dsn", Kind::Text, "CONNINFO",
         "libpq connection string of a role with REPLICATION: streams the slot and reads definitions",
         [](const Settings&) { return std::string("required"); },
         [](Settings& s, std::string_view v) {
             s.dsn = connection_string(v, "'host=/run/postgresql dbname=app user=docsync_repl'");
         }},
        {"pool-dsn", Kind::Text, "CONNINFO",
         "libpq connection string of the SELECT-only reader role that runs the doc queries; may be a hot "
         "standby",
         [](const Settings&) { return std::string("required"); },
         [](Settings& s, std::string_view v) {
             s.pool_dsn = connection_string(v, "'host=/run/postgresql dbname=app user=docsync_reader'");
         }},
        {"slot", Kind::Text, "NAME", "logical replication slot the worker consumes",
         [](const Settings& s) { return s.slot; }, [](Settings& s, std::string_view v) { s.slot = slot_name(v); }},
        {"create-slot", Kind::Flag, "", "create the slot when it does not exist",
         [](const Settings& s) { return std::string(s.create_slot ? "true" : "false"); },
         [](Settings& s, std::string_view v) { s.create_slot = parse_bool(v); }},
        {"sink", Kind::Text, "SINK", "where docs are published: stdout, file:/path/docs.jsonl or redis://host:port",
         [](const Settings& s) { return s.sink; }, [](Settings& s, std::string_view v) { s.sink = sink_spec(v); }},
        {"live", Kind::Choice, "all|subscribers",
         "which docs are kept current: every doc the sink holds, or only docs with subscribers",
         [](const Settings& s) { return std::string(s.live == LiveMode::All ? "all" : "subscribers"); },
         [](Settings& s, std::string_view v) {
             auto value = lower(trim(v));
             if (value == "all") s.live = LiveMode::All;
             else if (value == "subscribers") s.live = LiveMode::Subscribers;
             else throw SettingError("unknown live mode; give all or subscribers");
         }},
        {"live-poll", Kind::Duration, "DURATION", "how often the subscriber set is polled (--live subscribers)",
         [](const Settings& s) { return format_duration(s.live_poll); },
         [](Settings& s, std::string_view v) {
             s.live_poll = duration_in(v, std::chrono::milliseconds(10), std::chrono::hours(1));
         }},
        {"warm", Kind::List, "CHANNEL",
         "a doc to compute and publish at start, by its channel (db:order:42); repeat it for more docs. Without "
         "it a doc is first published when a row it watches changes",
         [](const Settings&) { return std::string("(none)"); },
         [](Settings& s, std::string_view v) { s.warm.push_back(warm_channel(v)); }},
        {"pool", Kind::Count, "N", "reader connections for doc and keys queries",
         [](const Settings& s) { return std::to_string(s.pool); },
         [](Settings& s, std::string_view v) { s.pool = static_cast<unsigned>(count_in(v, 1, 1000)); }},
        {"statement-timeout", Kind::Duration, "DURATION",
         "statement_timeout of every doc and keys query (also enforced client-side)",
         [](const Settings& s) { return format_duration(s.statement_timeout); },
         [](Settings& s, std::string_view v) {
             s.statement_timeout = duration_in(v, std::chrono::milliseconds(1), std::chrono::hours(24));
         }},
        {"drain-timeout", Kind::Duration, "DURATION",
         "longest a SIGTERM drain may take; past it (a sink that does not take writes) the worker exits 1, leaving "
         "what it could not publish unacknowledged",
         [](const Settings& s) { return format_duration(s.drain_timeout); },
         [](Settings& s, std::string_view v) {
             s.drain_timeout = duration_in(v, std::chrono::seconds(1), std::chrono::hours(1));
         }},
        {"max-doc-bytes", Kind::Size, "SIZE", "largest doc published; larger ones are recorded as errors",
         [](const Settings& s) { return format_size(s.max_doc_bytes); },
         [](Settings& s, std::string_view v) { s.max_doc_bytes = size_in(v, 1, GB); }},
        {"max-keys", Kind::Count, "N", "most keys one reverse-index lookup may return; more is an error, never truncated",
         [](const Settings& s) { return std::to_string(s.max_keys); },
         [](Settings& s, std::string_view v) { s.max_keys = count_in(v, 1, 100000000); }},
        {"max-retained-wal", Kind::Size, "SIZE",
         "unacknowledged WAL that fires the safety valve: recreate the slot and recompute every live doc",
         [](const Settings& s) { return format_size(s.max_retained_wal); },
         [](Settings& s, std::string_view v) { s.max_retained_wal = size_in(v, 1, 1024 * TB); }},
        {"status-dir", Kind::Text, "DIR", "directory of the status file the docsync.status view reads",
         [](const Settings& s) { return s.status_dir; },
         [](Settings& s, std::string_view v) { s.status_dir = non_empty(v, "/run/docsync"); }},
        {"status-interval", Kind::Duration, "DURATION",
         "interval of standby status updates to the server; keep it below wal_sender_timeout",
         [](const Settings& s) { return format_duration(s.status_interval); },
         [](Settings& s, std::string_view v) {
             s.status_interval = duration_in(v, std::chrono::milliseconds(10), std::chrono::minutes(10));
         }},
        {"max-pending-txns", Kind::Count, "N",
         "transactions decoded but not yet complete before the worker stops reading the stream",
         [](const Settings& s) { return std::to_string(s.max_pending_txns); },
         [](Settings& s, std::string_view v) { s.max_pending_txns = count_in(v, 1, 100000000); }},
        {"max-pending-bytes", Kind::Size, "SIZE", "bytes of those pending transactions before the worker stops reading",
         [](const Settings& s) { return format_size(s.max_pending_bytes); },
         [](Settings& s, std::string_view v) { s.max_pending_bytes = size_in(v, kB, TB); }},
        {"config", Kind::Text, "FILE", "JSON config file whose keys are these settings' long names",
         [](const Settings& s) { return show_text(s.config); },
         [](Settings& s, std::string_view v) { s.config = non_empty(v, "/etc/docsync/docsync.json"); }},
        {"allow-unsafe-pool", Kind::Flag, "",
         "run even when the pool role is not harmless (throwaway setups only; logged loudly)",
         [](const Settings& s) { return std::string(s.allow_unsafe_pool ? "true" : "false"); },
         [](Settings& s, std::string_view v) { s.allow_unsafe_pool = parse_bool(v); }},
        {"log-format", Kind::Choice, "text|json", "log lines as text or as one JSON object per line",
         [](const Settings& s) { return std::string(s.log_format == LogFormat::Text ? "text" : "json"); },
         [](Settings& s, std::string_view v) {
             auto value = lower(trim(v));
             if (value == "text") s.log_format = LogFormat::Text;
             else if (value == "json") s.log_format = LogFormat::Json;
             else throw SettingError("unknown log format; give text or json");
         }},
        {"log-file", Kind::Text, "FILE", "append the log to this file instead of stderr; reopened on SIGHUP",
         [](const Settings& s) { return s.log_file.empty() ? std::string("(stderr)") : s.log_file; },
         [](Settings& s, std::string_view v) { s.log_file = non_empty(v, "/var/log/docsync/worker.log"); }},
        {"log-level", Kind::Choice, "LEVEL", "lowest level logged: debug, info, warning or error",
         [](const Settings& s) { return std::string(log_level_name(s.log_level)); },
         [](Settings& s, std::string_view v) { s.log_level = log_level(v); }},
        {"threads", Kind::Count, "N", "compute threads running doc and keys queries",
         [](const Settings&) { return std::string("the value of --pool"); },
         [](Settings& s, std::string_view v) { s.threads = static_cast<unsigned>(count_in(v, 1, 1024)); }},
    };
    return table;
}

const Spec* find_spec(std::string_view name) {
    for (const auto& spec : specs())
        if (name == spec.name) return &spec;
    return nullptr;
}

std::string env_name(std::string_view name) {
    std::string out = "DOCSYNC_";
    for (char c : name) out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t above = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// The setting whose name is closest to `key` (a typo, underscores for dashes), or nullptr.
const Spec* closest_spec(std::string_view key) {
    std::string probe = lower(key);
    std::replace(probe.begin(), probe.end(), '_', '-');
    const Spec* best = nullptr;
    // Close means fewer than 4 edits, and fewer than half the name's length: "x" is no typo of "dsn".
    std::size_t best_distance = std::min<std::size_t>(4, probe.size() / 2 + 1);
    if (probe.size() <= 64) {
        for (const auto& spec : specs()) {
            auto d = edit_distance(probe, spec.name);
            if (d < best_distance) {
                best_distance = d;
                best = &spec;
            }
        }
    }
    return best;
}

// "; did you mean "max-retained-wal"?" when a known setting is close, else the pointer to --help.
std::string suggestion(std::string_view key) {
    if (const Spec* best = closest_spec(key)) return std::string("; did you mean \"") + best->name + "\"?";
    return "; remove it (docsync-worker --help lists the settings)";
}

// A JSON value as setting text, checking the JSON type against the setting's kind.
std::string config_value_text(const Spec& spec, const rapidjson::Value& value) {
    switch (spec.kind) {
        case Kind::Flag:
            if (value.IsBool()) return value.GetBool() ? "true" : "false";
            throw SettingError("expected true or false");
        case Kind::Size:
        case Kind::Count:
            if (value.IsUint64()) return std::to_string(value.GetUint64());
            if (value.IsString()) return std::string(value.GetString(), value.GetStringLength());
            if (spec.kind == Kind::Size) throw SettingError("expected a size such as \"1GB\" or a number of bytes");
            throw SettingError("expected a whole number such as 4");
        case Kind::Duration:
            if (value.IsString()) return std::string(value.GetString(), value.GetStringLength());
            throw SettingError("expected a duration string with a unit, such as \"5s\" or \"250ms\"");
        case Kind::List:
            // An array of strings, one value per line of the setting's text; or one string.
            if (value.IsArray()) {
                std::string text;
                for (rapidjson::SizeType i = 0; i < value.Size(); ++i) {
                    if (!value[i].IsString()) throw SettingError("expected an array of strings");
                    std::string item(value[i].GetString(), value[i].GetStringLength());
                    if (item.find_first_of(std::string_view("\0\n", 2)) != std::string::npos)
                        throw SettingError("a value holds a NUL or a line break; give one value per string");
                    text += (i ? "\n" : "") + item;
                }
                return text;
            }
            [[fallthrough]];
        case Kind::Text:
        case Kind::Choice:
            if (value.IsString()) {
                std::string text(value.GetString(), value.GetStringLength());
                if (text.find('\0') != std::string::npos) throw SettingError("contains a NUL character; remove it");
                return text;
            }
            throw SettingError(spec.kind == Kind::List ? "expected an array of strings" : "expected a string");
    }
    throw SettingError("expected a string");
}

std::string help_text() {
    Settings defaults;
    std::ostringstream out;
    out << "docsync-worker: keeps JSON documents computed from PostgreSQL current.\n\n"
        << "Usage: docsync-worker --dsn CONNINFO --pool-dsn CONNINFO [settings]\n\n"
        << "Settings (default in brackets):\n";
    for (const auto& spec : specs()) {
        std::string left = std::string("  --") + spec.name;
        if (spec.kind != Kind::Flag) left += std::string(" ") + spec.value_name;
        out << left;
        if (left.size() < 34) out << std::string(34 - left.size(), ' ');
        else out << "\n" << std::string(34, ' ');
        // The description, wrapped at 100 columns under its column.
        std::istringstream words(std::string(spec.help) + " [" + spec.show_default(defaults) + "]");
        std::size_t column = 34;
        std::string word;
        bool first = true;
        while (words >> word) {
            if (!first && column + 1 + word.size() > 100) {
                out << "\n" << std::string(34, ' ');
                column = 34;
                first = true;
            }
            if (!first) {
                out << ' ';
                ++column;
            }
            out << word;
            column += word.size();
            first = false;
        }
        out << "\n";
    }
    out << "  -h, --help                      print this help and exit\n"
        << "  --version                       print the version and exit\n\n"
        << "Every setting can also be given as an environment variable DOCSYNC_<NAME> (upper case, dashes\n"
        << "as underscores: DOCSYNC_MAX_RETAINED_WAL=1GB) or as a key of the JSON config file named by\n"
        << "--config or DOCSYNC_CONFIG ({\"max-retained-wal\": \"1GB\"}; unknown keys are errors).\n"
        << "Precedence: flag > environment variable > config file > default.\n"
        << "Flags as environment variables or config keys take true or false.\n"
        << "Sizes: a whole number with B, kB, MB, GB or TB (powers of 1024; KiB, MiB, GiB, TiB too); a\n"
        << "bare number is bytes. Durations: a whole number with ms, s, min, h or d (a unit is required).\n"
        << "No other units: 1G and 5sec are refused, naming the spelling to use.\n"
        << "A setting given several times (--warm) takes every value; as an environment variable, one per\n"
        << "line; in the config file, an array of strings.\n"
        << "Invalid settings exit with status 2.\n";
    return out.str();
}

std::string read_config_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        int err = errno;
        throw SettingError("config file " + quote_text(path) + ": cannot open (" + std::strerror(err) +
                           "); give a readable file with --config or DOCSYNC_CONFIG");
    }
    std::string text;
    char buf[8192];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        text.append(buf, static_cast<std::size_t>(in.gcount()));
        if (text.size() > max_config_bytes)
            throw SettingError("config file " + quote_text(path) + ": larger than 1MB; a config file holds only settings");
    }
    if (in.bad()) throw SettingError("config file " + quote_text(path) + ": read error; check the file");
    return text;
}

// The command line as given: each setting's values (a switch without a value is "true").
struct CommandLine {
    bool help = false;
    bool version = false;
    std::vector<std::vector<std::string>> values;  // per setting, in specs() order
    std::string error;                             // the first problem, one line, without the program name
};

// How to write a setting with a value: "--pool 4" (its default, when that reads back) or "--dsn CONNINFO".
std::string usage_of(const Spec& spec) {
    std::string flag = std::string("--") + spec.name;
    if (spec.kind == Kind::Size || spec.kind == Kind::Duration || spec.kind == Kind::Count || spec.kind == Kind::Choice) {
        Settings defaults, probe;
        std::string shown = spec.show_default(defaults);
        try {
            spec.apply(probe, shown);
            return "e.g. " + flag + " " + shown;
        } catch (const SettingError&) {
        }
    }
    return "as in " + flag + " " + spec.value_name;
}

// An option as typed, for a message: quoted when it holds a control byte, so the message stays one line.
std::string shown_option(const std::string& text) {
    bool plain = std::none_of(text.begin(), text.end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7f;
    });
    return plain ? text : quote_text(text);
}

// Reads --name VALUE, --name=VALUE and switches (--name, --name=false). -h/--help and --version
// anywhere win over everything else.
CommandLine read_command_line(const std::vector<std::string>& args) {
    const auto& table = specs();
    CommandLine line;
    line.values.resize(table.size());
    for (const auto& arg : args) {
        if (arg == "-h" || arg == "--help") {
            line.help = true;
            return line;
        }
        if (arg == "--version") {
            line.version = true;
            return line;
        }
    }
    const std::string help = "docsync-worker --help lists the settings";
    // "unknown option --x; did you mean --y?" when a setting is close, else the pointer to --help.
    auto unknown = [&](const std::string& shown, const Spec* close) {
        return "unknown option " + shown_option(shown) +
               (close ? std::string("; did you mean --") + close->name + "?" : "; " + help);
    };
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        bool long_option = arg.size() > 2 && arg.rfind("--", 0) == 0;
        if (!long_option && arg.size() > 1 && arg[0] == '-') {
            auto letters = arg.find_first_not_of('-');
            std::string name = letters == std::string::npos ? std::string() : arg.substr(letters);
            name = name.substr(0, name.find('='));
            const Spec* close = name.empty() ? nullptr : find_spec(name);
            if (!close && !name.empty()) close = closest_spec(name);
            line.error = unknown(arg.substr(0, arg.find('=')), close);
            return line;
        }
        if (!long_option) {
            line.error = "unexpected argument " + quote_text(arg) + ": ";
            if (arg.find('=') != std::string::npos && i > 0)
                line.error += "a value that holds spaces needs quotes, e.g. --dsn 'host=/run/postgresql dbname=app'";
            else
                line.error += "settings are given as --name VALUE (" + help + ")";
            return line;
        }
        auto eq = arg.find('=');
        std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
        const Spec* spec = find_spec(name);
        if (!spec) {
            line.error = unknown("--" + name, closest_spec(name));
            return line;
        }
        std::string value;
        if (eq != std::string::npos) {
            value = arg.substr(eq + 1);
        } else if (spec->kind == Kind::Flag) {
            if (i + 1 < args.size() && (args[i + 1].empty() || args[i + 1][0] != '-')) {
                line.error = "--" + name + " takes no separate value (" + quote_text(args[i + 1]) + "): write --" +
                             name + " to turn it on, or --" + name + "=false to turn it off";
                return line;
            }
            value = "true";
        } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
            value = args[++i];
        } else {
            line.error = "--" + name + " needs a value, " + usage_of(*spec);
            return line;
        }
        auto& values = line.values[static_cast<std::size_t>(spec - table.data())];
        if (!values.empty() && spec->kind != Kind::List) {
            line.error = "--" + name + " is given twice (" + quote_text(values.front()) + ", then " + quote_text(value) +
                         "); keep one";
            return line;
        }
        values.push_back(value);
    }
    return line;
}

ParsedSettings fail(std::string message) {
    ParsedSettings result;
    result.run = false;
    result.exit_code = 2;
    result.error = std::string(program) + ": " + message;
    return result;
}

}  // namespace

std::uint64_t parse_size(std::string_view text) {
    constexpr const char* example = "1GB or 512kB";
    auto [value, written] = split_number(text, "size", example, true);
    std::string unit = lower(written);
    std::uint64_t multiplier = 0;
    if (unit.empty() || unit == "b") multiplier = 1;
    else if (unit == "kb" || unit == "kib") multiplier = kB;
    else if (unit == "mb" || unit == "mib") multiplier = MB;
    else if (unit == "gb" || unit == "gib") multiplier = GB;
    else if (unit == "tb" || unit == "tib") multiplier = TB;
    else {
        // Other spellings of the units are refused, naming the one to write.
        static const std::pair<const char*, const char*> spellings[] = {
            {"byte", "B"},      {"bytes", "B"},      {"k", "kB"},        {"kilobyte", "kB"}, {"kilobytes", "kB"},
            {"m", "MB"},        {"megabyte", "MB"},  {"megabytes", "MB"}, {"g", "GB"},        {"gigabyte", "GB"},
            {"gigabytes", "GB"}, {"t", "TB"},        {"terabyte", "TB"}, {"terabytes", "TB"}};
        for (const auto& [spelled, canonical] : spellings)
            if (unit == spelled)
                throw SettingError("unknown size unit " + quote_text(written) + "; did you mean " + std::to_string(value) +
                                   canonical + "? (units: B, kB, MB, GB, TB)");
        throw SettingError("unknown size unit " + quote_text(written) + "; use B, kB, MB, GB or TB, e.g. " + std::string(example));
    }
    return checked_multiply(value, multiplier, "size", example);
}

std::chrono::milliseconds parse_duration(std::string_view text) {
    constexpr const char* example = "5s, 250ms or 2min";
    auto [value, written] = split_number(text, "duration", example, true);
    std::string unit = lower(written);
    std::uint64_t multiplier = 0;
    if (unit == "ms") multiplier = 1;
    else if (unit == "s") multiplier = 1000;
    else if (unit == "min") multiplier = 60 * 1000;
    else if (unit == "h") multiplier = 3600 * 1000;
    else if (unit == "d") multiplier = 24 * 3600 * 1000;
    else if (unit.empty()) throw SettingError("duration without a unit; add ms, s, min, h or d, e.g. " + std::string(example));
    else if (unit == "m")
        throw SettingError("\"m\" is ambiguous; write " + std::to_string(value) + "min for minutes or " +
                           std::to_string(value) + "ms for milliseconds");
    else {
        // Other spellings of the units are refused, naming the one to write.
        static const std::pair<const char*, const char*> spellings[] = {
            {"msec", "ms"}, {"msecs", "ms"}, {"millisecond", "ms"}, {"milliseconds", "ms"}, {"sec", "s"},
            {"secs", "s"}, {"second", "s"}, {"seconds", "s"}, {"mins", "min"}, {"minute", "min"},
            {"minutes", "min"}, {"hr", "h"}, {"hrs", "h"}, {"hour", "h"}, {"hours", "h"}, {"day", "d"},
            {"days", "d"}};
        for (const auto& [spelled, canonical] : spellings)
            if (unit == spelled)
                throw SettingError("unknown duration unit " + quote_text(written) + "; did you mean " + std::to_string(value) +
                                   canonical + "? (units: ms, s, min, h, d)");
        throw SettingError("unknown duration unit " + quote_text(written) + "; use ms, s, min, h or d, e.g. " +
                           std::string(example));
    }
    auto ms = checked_multiply(value, multiplier, "duration", example);
    if (ms > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max() / 1000))
        throw SettingError("duration too large; give a smaller one, e.g. " + std::string(example));
    return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

std::uint64_t parse_count(std::string_view text) {
    auto [value, rest] = split_number(text, "whole number", "4", false);
    if (!rest.empty()) throw SettingError("not a whole number; give digits only, e.g. 4");
    return value;
}

bool parse_bool(std::string_view text) {
    auto value = lower(trim(text));
    if (value == "true" || value == "yes" || value == "on" || value == "1") return true;
    if (value == "false" || value == "no" || value == "off" || value == "0") return false;
    throw SettingError("not a boolean; give true or false");
}

std::string format_size(std::uint64_t bytes) {
    static const std::pair<std::uint64_t, const char*> units[] = {{TB, "TB"}, {GB, "GB"}, {MB, "MB"}, {kB, "kB"}};
    for (const auto& [size, name] : units)
        if (bytes != 0 && bytes % size == 0) return std::to_string(bytes / size) + name;
    return std::to_string(bytes) + "B";
}

std::string format_duration(std::chrono::milliseconds duration) {
    auto ms = duration.count();
    static const std::pair<std::int64_t, const char*> units[] = {
        {24 * 3600 * 1000LL, "d"}, {3600 * 1000LL, "h"}, {60 * 1000LL, "min"}, {1000LL, "s"}};
    for (const auto& [size, name] : units)
        if (ms != 0 && ms % size == 0) return std::to_string(ms / size) + name;
    return std::to_string(ms) + "ms";
}

std::vector<std::pair<std::string, std::string>> parse_config_text(std::string_view json, std::string_view origin) {
    std::string where = "config file " + quote_text(origin);
    // RapidJSON's parser recurses per nesting level, so deep nesting is refused before parsing
    // (settings need one level) instead of overflowing the stack.
    std::size_t depth = 0;
    bool in_string = false, escaped = false;
    for (char c : json) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > 32) throw SettingError(where + ": nested deeper than 32 levels; a config file is one object of settings");
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    rapidjson::Document doc;
    rapidjson::MemoryStream stream(json.data(), json.size());
    doc.ParseStream<rapidjson::kParseStopWhenDoneFlag | rapidjson::kParseIterativeFlag>(stream);
    if (doc.HasParseError()) {
        // Line and column of the error offset, for the fix.
        std::size_t offset = std::min(doc.GetErrorOffset(), json.size());
        std::size_t line = 1, column = 1;
        for (std::size_t i = 0; i < offset; ++i) {
            if (json[i] == '\n') {
                ++line;
                column = 1;
            } else {
                ++column;
            }
        }
        throw SettingError(where + ": invalid JSON at line " + std::to_string(line) + " column " +
                           std::to_string(column) + " (" + rapidjson::GetParseError_En(doc.GetParseError()) +
                           "); fix the syntax");
    }
    // Anything after the value besides whitespace is an error too.
    for (std::size_t i = std::min(stream.Tell(), json.size()); i < json.size(); ++i)
        if (!std::isspace(static_cast<unsigned char>(json[i])))
            throw SettingError(where + ": text after the JSON object; remove it");
    if (!doc.IsObject())
        throw SettingError(where + ": not a JSON object; write {\"dsn\": \"…\", \"max-retained-wal\": \"1GB\"}");
    std::vector<std::pair<std::string, std::string>> out;
    // Indexed, not iterated: comparing RapidJSON member iterators is ambiguous under C++20.
    for (rapidjson::SizeType i = 0; i < doc.MemberCount(); ++i) {
        const auto& member = doc.MemberBegin()[i];
        std::string key(member.name.GetString(), member.name.GetStringLength());
        const Spec* spec = find_spec(key);
        if (!spec) throw SettingError(where + ": unknown setting " + quote_text(key) + suggestion(key));
        if (key == "config")
            throw SettingError(where + ": \"config\" cannot be set in a config file; give it with --config or DOCSYNC_CONFIG");
        for (const auto& seen : out)
            if (seen.first == key) throw SettingError(where + ": " + quote_text(key) + " is given twice; keep one");
        try {
            out.emplace_back(key, config_value_text(*spec, member.value));
        } catch (const SettingError& e) {
            throw SettingError(where + ": " + quote_text(key) + ": " + e.what());
        }
    }
    return out;
}

std::string settings_help() { return help_text(); }

std::string apply_log_settings(const Settings& settings) {
    if (auto reason = set_log_file(settings.log_file); !reason.empty())
        return std::string(program) + ": --log-file " + quote_text(settings.log_file) + ": cannot open (" + reason +
               "); give a writable path, e.g. /var/log/docsync/worker.log";
    set_log_level(settings.log_level);
    set_log_format(settings.log_format);
    return {};
}

ParsedSettings parse_settings(int argc, const char* const* argv, const char* const* envp) {
    // 1. The command line: every setting is captured as text when given.
    const auto& table = specs();
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i] ? argv[i] : "");
    CommandLine line = read_command_line(args);
    if (line.help || line.version) {
        ParsedSettings result;
        result.output = line.help ? help_text() : std::string(program) + " " + DOCSYNC_VERSION + "\n";
        return result;
    }
    if (!line.error.empty()) return fail(line.error);

    // 2. The environment: DOCSYNC_<NAME>.
    std::map<std::string, std::string> environment;
    for (auto p = envp; p && *p; ++p) {
        std::string_view entry(*p);
        if (entry.rfind("DOCSYNC_", 0) != 0) continue;
        auto eq = entry.find('=');
        if (eq == std::string_view::npos) continue;
        environment.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    }

    // 3. The config file named by --config or DOCSYNC_CONFIG.
    std::vector<std::pair<std::string, std::string>> file_values;
    std::string config_path;
    auto config_index = static_cast<std::size_t>(find_spec("config") - table.data());
    bool config_flag = !line.values[config_index].empty();
    if (config_flag) config_path = line.values[config_index].front();
    else if (auto it = environment.find("DOCSYNC_CONFIG"); it != environment.end()) config_path = it->second;
    if (config_flag || environment.count("DOCSYNC_CONFIG")) {
        if (trim(config_path).empty())
            return fail("--config: must not be empty; give the path of a JSON config file, e.g. /etc/docsync/docsync.json");
        try {
            file_values = parse_config_text(read_config_file(config_path), config_path);
        } catch (const SettingError& e) {
            return fail(e.what());
        }
    }

    // 4. Merge: flag > environment > config file > default.
    ParsedSettings result;
    result.run = true;
    Settings& settings = result.settings;
    bool threads_given = false;
    for (std::size_t i = 0; i < table.size(); ++i) {
        const Spec& spec = table[i];
        // The values of the source that wins, each with where it came from for a message. A List
        // setting's environment variable and config key hold one value per line.
        std::vector<std::pair<std::string, std::string>> given;  // (value, source)
        auto split = [&](const std::string& text, const std::string& prefix) {
            if (spec.kind != Kind::List) {
                given.emplace_back(text, prefix + quote_text(text));
                return;
            }
            std::size_t start = 0;
            while (start <= text.size()) {
                auto end = std::min(text.find('\n', start), text.size());
                std::string item = text.substr(start, end - start);
                if (!trim(item).empty()) given.emplace_back(item, prefix + quote_text(item));
                start = end + 1;
            }
        };
        if (!line.values[i].empty()) {
            for (const auto& value : line.values[i])
                given.emplace_back(value, std::string("--") + spec.name + " " + quote_text(value));
        } else if (auto it = environment.find(env_name(spec.name)); it != environment.end()) {
            split(it->second, it->first + "=");
        } else {
            auto found = std::find_if(file_values.begin(), file_values.end(),
                                      [&](const auto& kv) { return kv.first == spec.name; });
            if (found == file_values.end()) continue;
            split(found->second, "config file " + quote_text(config_path) + ": " + quote_text(spec.name) + ": ");
        }
        for (const auto& [value, source] : given) {
            try {
                spec.apply(settings, value);
            } catch (const SettingError& e) {
                return fail(source + ": " + e.what());
            }
        }
        if (std::string_view(spec.name) == "threads") threads_given = true;
    }
    if (!threads_given) settings.threads = settings.pool;

    if (settings.dsn.empty())
        return fail("--dsn is required: give the connection string of a role with REPLICATION, e.g. --dsn "
                    "'host=/run/postgresql dbname=app user=docsync_repl' (or DOCSYNC_DSN, or \"dsn\" in the config file)");
    if (settings.pool_dsn.empty())
        return fail("--pool-dsn is required: give the connection string of the SELECT-only reader role, e.g. "
                    "--pool-dsn 'host=/run/postgresql dbname=app user=docsync_reader' (or DOCSYNC_POOL_DSN, or "
                    "\"pool-dsn\" in the config file)");
    return result;
}

}  // namespace docsync
