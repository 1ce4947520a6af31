// The worker's settings table: every setting's name, kind, help text, default and reader, in --help
// order, and the worker as the shared readers see it (its name, variables, examples, --help's prose).

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "config/settings.hpp"
#include "config/spec.hpp"
#include "engine/channel.hpp"
#include "pg/connection.hpp"
#include "settings/listen.hpp"
#include "settings/log_settings.hpp"

namespace docsync::config {

using namespace settings;

namespace {

// --- per-setting readers: each throws SettingError saying what is wrong and the fix ---

std::string connection_string(std::string_view text, const char* example) {
    std::string value = non_empty(text, example);
    if (std::string problem = pg::conninfo_problem(value); !problem.empty())
        throw SettingError("not a libpq connection string (" + problem + "); give e.g. " + example);
    return value;
}

std::string sink_spec(std::string_view text) {
    std::string value(trim(text));
    const char* fix = "; give stdout, file:/path/docs.jsonl, redis://127.0.0.1:6379 or "
                      "redis-cluster://10.0.0.1:7000,10.0.0.2:7000";
    if (value == "stdout") return value;
    if (value.rfind("file:", 0) == 0) {
        if (value.size() == 5) throw SettingError(std::string("file sink without a path") + fix);
        return value;
    }
    if (value.rfind("redis://", 0) == 0) {
        if (value.size() == 8) throw SettingError(std::string("redis sink without a host") + fix);
        return value;
    }
    if (value.rfind("redis-cluster://", 0) == 0) {
        if (value.size() == 16) throw SettingError(std::string("redis-cluster sink without a node") + fix);
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

// --metrics-listen: an IP address and a port, "127.0.0.1:9464" or "[::1]:9464"; empty: off. The
// address must be literal: a host name would make the start depend on name resolution.
void metrics_listen(Settings& s, std::string_view text) {
    s.metrics_address.clear();
    s.metrics_port = 0;
    if (trim(text).empty()) return;
    auto listen = parse_listen_address(text, {.examples = "127.0.0.1:9464 or [::]:9464"});
    s.metrics_address = listen.address;
    s.metrics_port = listen.port;
}

// --audit-rate: a percentage of the live docs per minute, "1%" or "0.5%", or 0 (off). The % is
// required: a bare number could as well mean docs or docs per second.
double audit_rate(std::string_view text) {
    std::string value(trim(text));
    const char* fix = "; give a percentage of the live docs to check per minute, from 0.001% to 6000%, such as 1% "
                      "or 0.5%, or 0 to turn the audit off";
    if (value == "0" || value == "0%") return 0;
    if (value.size() < 2 || value.back() != '%') throw SettingError(std::string("not a percentage") + fix);
    std::string number = value.substr(0, value.size() - 1);
    auto dot = number.find('.');
    std::string whole = number.substr(0, dot);
    std::string fraction = dot == std::string::npos ? std::string() : number.substr(dot + 1);
    auto digits = [](const std::string& part) {
        return std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    };
    if (whole.empty() || whole.size() > 4 || !digits(whole) || (dot != std::string::npos && fraction.empty()) ||
        fraction.size() > 3 || !digits(fraction))
        throw SettingError(std::string("not a percentage") + fix);
    double rate = std::stod(whole) + (fraction.empty() ? 0 : std::stod(fraction) / std::pow(10.0, fraction.size()));
    if (rate != 0 && (rate < 0.001 || rate > 6000)) throw SettingError(std::string("out of range") + fix);
    return rate;
}

std::string show_rate(double rate) {
    if (rate == 0) return "0 (off)";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g%%", rate);
    return buf;
}

std::string show_text(const std::string& value) { return value.empty() ? "(none)" : value; }

}  // namespace

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
        {"plugin", Kind::Choice, "docsync|pgoutput|auto",
         "the slot's output plugin: docsync, pgoutput (built in, over a publication the worker keeps), or auto "
         "(the existing slot's)",
         [](const Settings& s) { return s.plugin; },
         [](Settings& s, std::string_view v) {
             auto value = lower(trim(v));
             if (value != "docsync" && value != "pgoutput" && value != "auto")
                 throw SettingError("unknown plugin; give docsync, pgoutput or auto");
             s.plugin = value;
         }},
        {"catalog-check", Kind::Duration, "DURATION",
         "with --plugin pgoutput, how often what the doc queries read is checked for DDL that docsync's event "
         "triggers did not see (their docs are then recomputed); 0 turns it off",
         [](const Settings& s) { return format_duration(s.catalog_check); },
         [](Settings& s, std::string_view v) {
             s.catalog_check = trim(v) == "0" ? std::chrono::milliseconds(0)
                                              : duration_in(v, std::chrono::milliseconds(100), std::chrono::hours(24));
         }},
        {"pgoutput-streaming", Kind::Choice, "auto|off",
         "with --plugin pgoutput, auto reads protocol version 2 with streamed in-progress transactions on "
         "PostgreSQL 14 and later (version 1 before); off reads version 1, the server holding a large "
         "transaction until its commit",
         [](const Settings& s) { return std::string(s.pgoutput_streaming ? "auto" : "off"); },
         [](Settings& s, std::string_view v) {
             auto value = lower(trim(v));
             if (value != "auto" && value != "off") throw SettingError("give auto or off");
             s.pgoutput_streaming = value == "auto";
         }},
        {"stream-memory", Kind::Size, "SIZE",
         "with pgoutput streaming, memory for streamed transactions held until they commit; past it the "
         "largest goes to a temporary file in $TMPDIR (else /tmp) until it ends",
         [](const Settings& s) { return format_size(s.stream_memory); },
         [](Settings& s, std::string_view v) { s.stream_memory = size_in(v, 0, TB); }},
        {"standby", Kind::Flag, "",
         "while another worker holds the slot's lease, wait as its hot spare and take over when it stops or dies",
         [](const Settings& s) { return std::string(s.standby ? "true" : "false"); },
         [](Settings& s, std::string_view v) { s.standby = parse_bool(v); }},
        {"sink", Kind::Text, "SINK", "where docs are published: stdout, file:/path/docs.jsonl, redis://host:port or "
         "redis-cluster://host:port[,host:port...]",
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
        {"patches", Kind::Choice, "on|off",
         "send a doc that changed as a patch from the version published before, when that is smaller "
         "(docs/patches.md); off: every message and JSONL line is the whole doc",
         [](const Settings& s) { return std::string(s.patches ? "on" : "off"); },
         [](Settings& s, std::string_view v) {
             auto value = lower(trim(v));
             if (value == "on") s.patches = true;
             else if (value == "off") s.patches = false;
             else throw SettingError("unknown patches mode; give on or off");
         }},
        {"patch-memory", Kind::Size, "SIZE",
         "memory for the last published text of each doc patches are made from (--patches on); the least "
         "recently published are dropped past it and sent whole next time",
         [](const Settings& s) { return format_size(s.patch_memory); },
         [](Settings& s, std::string_view v) { s.patch_memory = size_in(v, 64 * kB, TB); }},
        {"patch-min-bytes", Kind::Size, "SIZE",
         "smallest doc sent as a patch (--patches on); smaller docs are always sent whole",
         [](const Settings& s) { return format_size(s.patch_min_bytes); },
         [](Settings& s, std::string_view v) { s.patch_min_bytes = size_in(v, 64, GB); }},
        {"batch", Kind::Count, "N",
         "most docs of one query computed by one statement, and keys lookups of one watch run by one, when that "
         "many wait at once; 1 computes each alone",
         [](const Settings& s) { return std::to_string(s.batch); },
         [](Settings& s, std::string_view v) { s.batch = count_in(v, 1, 10000); }},
        {"max-keys", Kind::Count, "N", "most keys one reverse-index lookup may return; more is an error, never truncated",
         [](const Settings& s) { return std::to_string(s.max_keys); },
         [](Settings& s, std::string_view v) { s.max_keys = count_in(v, 1, 100000000); }},
        {"key-check-rate", Kind::Count, "N",
         "server key checks per second, at most, for channels only subscribers name whose key type the worker "
         "cannot check itself; the rest wait for a later poll; 0: no bound",
         [](const Settings& s) { return std::to_string(s.key_check_rate); },
         [](Settings& s, std::string_view v) { s.key_check_rate = count_in(v, 0, 100000); }},
        {"max-retained-wal", Kind::Size, "SIZE",
         "unacknowledged WAL that fires the safety valve: recreate the slot and recompute every live doc",
         [](const Settings& s) { return format_size(s.max_retained_wal); },
         [](Settings& s, std::string_view v) { s.max_retained_wal = size_in(v, 1, 1024 * TB); }},
        {"audit-rate", Kind::Text, "PERCENT",
         "share of the live docs recomputed and compared with what the sink retains per minute, off the "
         "acknowledgement path; a doc found different is logged, counted and published again. 0 turns it off",
         [](const Settings& s) { return show_rate(s.audit_rate); },
         [](Settings& s, std::string_view v) {
             s.audit_rate = audit_rate(v);
             s.audit_rate_given = true;
         }},
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
         [](const Settings& s) { return std::string(log_format_name(s.log_format)); },
         [](Settings& s, std::string_view v) { s.log_format = parse_log_format(v); }},
        {"log-file", Kind::Text, "FILE", "append the log to this file instead of stderr; reopened on SIGHUP",
         [](const Settings& s) { return s.log_file.empty() ? std::string("(stderr)") : s.log_file; },
         [](Settings& s, std::string_view v) { s.log_file = non_empty(v, "/var/log/docsync/worker.log"); }},
        {"log-level", Kind::Choice, "LEVEL", "lowest level logged: debug, info, warning or error",
         [](const Settings& s) { return std::string(log_level_name(s.log_level)); },
         [](Settings& s, std::string_view v) { s.log_level = parse_log_level(v); }},
        {"threads", Kind::Count, "N", "compute threads running doc and keys queries",
         [](const Settings&) { return std::string("the value of --pool"); },
         [](Settings& s, std::string_view v) { s.threads = static_cast<unsigned>(count_in(v, 1, 1024)); }},
        {"metrics-listen", Kind::Text, "ADDR:PORT",
         "serve Prometheus metrics at http://ADDR:PORT/metrics (an IP address: 127.0.0.1:9464, [::]:9464)",
         [](const Settings& s) {
             return s.metrics_address.empty() ? std::string("off") : format_listen_address(s.metrics_address, s.metrics_port);
         },
         metrics_listen},
    };
    return table;
}

const settings::Program& program() {
    static const settings::Program worker = {
        .name = "docsync-worker",
        .env_prefix = "DOCSYNC_",
        .foreign_env_prefix = "DOCSYNC_GATEWAY_",
        .config_path_example = "/etc/docsync/docsync.json",
        .log_file_example = "/var/log/docsync/worker.log",
        .config_object_example = "{\"dsn\": \"…\", \"max-retained-wal\": \"1GB\"}",
        .quoting_example = "--dsn 'host=/run/postgresql dbname=app'",
        .help_intro = "docsync-worker: keeps JSON documents computed from PostgreSQL current.\n\n"
                      "Usage: docsync-worker --dsn CONNINFO --pool-dsn CONNINFO [settings]\n\n",
        .help_notes =
            "Every setting can also be given as an environment variable DOCSYNC_<NAME> (upper case, dashes\n"
            "as underscores: DOCSYNC_MAX_RETAINED_WAL=1GB) or as a key of the JSON config file named by\n"
            "--config or DOCSYNC_CONFIG ({\"max-retained-wal\": \"1GB\"}; unknown keys are errors).\n"
            "Precedence: flag > environment variable > config file > default.\n"
            "Flags as environment variables or config keys take true or false.\n"
            "Sizes: a whole number with B, kB, MB, GB or TB (powers of 1024; KiB, MiB, GiB, TiB too); a\n"
            "bare number is bytes. Durations: a whole number with ms, s, min, h or d (a unit is required).\n"
            "No other units: 1G and 5sec are refused, naming the spelling to use.\n"
            "A setting given several times (--warm) takes every value; as an environment variable, one per\n"
            "line; in the config file, an array of strings.\n"
            "Invalid settings exit with status 2.\n",
    };
    return worker;
}

}  // namespace docsync::config
