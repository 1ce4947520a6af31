#pragma once
// The SQLSTATEs the worker acts on or reports, named once (PostgreSQL's errcodes, appendix A).
// The worker decides by SQLSTATE, never by a message's text, which a server may translate.

namespace docsync::sqlstate {

inline constexpr const char* kFeatureNotSupported = "0A000";       // e.g. a COPY a doc query started
inline constexpr const char* kUnableToConnect = "08001";           // sqlclient_unable_to_establish_sqlconnection
inline constexpr const char* kConnectionFailure = "08006";
inline constexpr const char* kProtocolViolation = "08P01";
inline constexpr const char* kInvalidSqlStatementName = "26000";  // e.g. a prepared statement that is gone
inline constexpr const char* kInvalidSchemaName = "3F000";         // no docsync schema: no extension
inline constexpr const char* kSyntaxError = "42601";              // e.g. a UNION of other column counts
inline constexpr const char* kInsufficientPrivilege = "42501";
inline constexpr const char* kUndefinedFunction = "42883";         // an older extension
inline constexpr const char* kUndefinedObject = "42704";           // e.g. a missing slot
inline constexpr const char* kObjectNotInPrerequisiteState = "55000";  // e.g. START_REPLICATION on an invalidated slot
inline constexpr const char* kObjectInUse = "55006";               // a slot another process streams
inline constexpr const char* kQueryCanceled = "57014";             // statement timeout or cancel
inline constexpr const char* kAdminShutdown = "57P01";
inline constexpr const char* kCrashShutdown = "57P02";
inline constexpr const char* kCannotConnectNow = "57P03";          // the server is starting or stopping

}  // namespace docsync::sqlstate
