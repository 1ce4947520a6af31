#pragma once
// The worker's exception type for failures that end an operation, classified by SQLSTATE.

#include <stdexcept>
#include <string>
#include <string_view>

namespace docsync {

// Failures of the environment are transient (retried, they hold the slot; docs/design.md, "durable
// outcomes"): SQLSTATE classes 08 (connection), 40 (transaction rollback), 53 (insufficient
// resources), 57 (operator intervention: a statement timeout or cancel 57014, shutdown, crash, cannot
// connect now, database dropped), 58 (system error), 55P03 (lock_timeout), 25P03 (an idle transaction
// ended by the server), and any lost connection (no SQLSTATE). Everything else a customer query can
// raise is permanent for that compute: it depends on the query and the data, not on the moment.
inline bool sqlstate_is_transient(std::string_view sqlstate) {
    if (sqlstate.empty()) return true;  // no SQLSTATE: the connection is gone
    if (sqlstate.size() != 5) return false;
    auto cls = sqlstate.substr(0, 2);
    if (cls == "08" || cls == "40" || cls == "53" || cls == "57" || cls == "58") return true;
    return sqlstate == "55P03" || sqlstate == "25P03";
}

// Data exceptions that say a value is not valid input for its type: a doc key PostgreSQL cannot
// read (a date past the type's range, text that is not UTF-8, 'abc' for an integer, a string too
// long for varchar(n)). A doc compute failing with one of them refuses the doc's channel: the key
// names no doc. Other class 22 errors (division by zero, ...) are the query's own failures.
inline bool sqlstate_is_invalid_input(std::string_view sqlstate) {
    for (std::string_view code : {"22P02",    // invalid_text_representation
                                  "22007",    // invalid_datetime_format
                                  "22008",    // datetime_field_overflow
                                  "22003",    // numeric_value_out_of_range
                                  "22009",    // invalid_time_zone_displacement_value
                                  "22021",    // character_not_in_repertoire (invalid byte sequence)
                                  "22P05",    // untranslatable_character
                                  "22001"})   // string_data_right_truncation
        if (sqlstate == code) return true;
    return false;
}

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message, std::string sqlstate = {}, bool transient = false)
        : std::runtime_error(message), sqlstate_(std::move(sqlstate)), transient_(transient) {}

    // The SQLSTATE the server reported, empty when the failure did not come from the server.
    const std::string& sqlstate() const noexcept { return sqlstate_; }
    // Transient failures are retried and hold the slot; permanent ones are recorded outcomes.
    bool transient() const noexcept { return transient_; }

private:
    std::string sqlstate_;
    bool transient_;
};

}  // namespace docsync
