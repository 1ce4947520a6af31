// The worker's settings: the command line, the DOCSYNC_* environment variables and the config file
// read through one table of settings (spec.hpp), merged by precedence.
#include "config/settings.hpp"

#include <algorithm>
#include <map>

#include "config/spec.hpp"

namespace docsync {

using namespace config;

namespace {

constexpr std::string_view program = "docsync-worker";

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
        result.output = line.help ? settings_help() : std::string(program) + " " + DOCSYNC_VERSION + "\n";
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
