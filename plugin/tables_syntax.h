/*-------------------------------------------------------------------------
 *
 * tables_syntax.h
 *		The grammar of the output plugin's `tables` option, without the server: plain C99, no
 *		PostgreSQL headers, no allocation. options.c builds the plugin's entries from it; the
 *		worker's tests and the fuzz target (tests/fuzz/plugin_tables.cpp) run it directly.
 *
 *		tables   := [ entry ( ',' entry )* ]
 *		entry    := relation [ '(' column ( ',' column )* ')' ]
 *		relation := OID-digits | [ identifier '.' ] identifier
 *		column   := attnum-digits (in an OID entry) | identifier (in a named entry)
 *
 * Identifiers follow SQL: double-quoted ones keep their case ("" is a quote inside), unquoted ones
 * start with a letter, '_' or a byte >= 0x80 and go on with those, digits and '$'; the caller folds
 * them (the server's downcase_identifier). Whitespace around tokens is allowed.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_TABLES_SYNTAX_H
#define DOCSYNC_TABLES_SYNTAX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

/* The largest attnum an OID entry may list (the server's MaxAttrNumber). */
#define DOCSYNC_TABLES_MAX_ATTNUM 32767

/* An identifier as written: its text between the quotes (quoted) or the bare word (unquoted). */
typedef struct DocsyncTablesIdent
{
	const char *start;
	size_t		len;			/* bytes; a quoted identifier's "" pairs count as two */
	bool		quoted;
} DocsyncTablesIdent;

/*
 * What the parser found, in order: each entry starts with `relid` or `relname` and is followed by
 * its columns (none: every column). Every callback is required except `is_space`, which defaults
 * to the server's scanner_isspace() of PostgreSQL 15 (' ', '\t', '\n', '\r', '\f').
 */
typedef struct DocsyncTablesVisitor
{
	void		(*relid) (void *arg, uint32_t relid);
	void		(*relname) (void *arg, const DocsyncTablesIdent *schema_or_null, const DocsyncTablesIdent *name);
	void		(*attnum) (void *arg, int attnum);
	void		(*column) (void *arg, const DocsyncTablesIdent *name);
	bool		(*is_space) (char c);
} DocsyncTablesVisitor;

/* Where the value is malformed and what was expected there (a phrase for the error message). */
typedef struct DocsyncTablesError
{
	size_t		offset;			/* bytes from the start of the value */
	const char *expected;		/* static text */
} DocsyncTablesError;

/*
 * Parses the NUL-terminated `value`, calling the visitor for what it finds. Returns true when the
 * whole value is well formed; otherwise false with *error filled (the visitor may have been called
 * for the entries before the error).
 */
extern bool docsync_tables_parse(const char *value, const DocsyncTablesVisitor *visitor, void *arg,
								 DocsyncTablesError *error);

/*
 * Writes the identifier's text to out (room for ident->len + 1 bytes): a quoted identifier with
 * each "" written as one quote, an unquoted one as is (not folded). Returns the length written,
 * without the terminating NUL it adds.
 */
extern size_t docsync_tables_ident_text(const DocsyncTablesIdent *ident, char *out);

#ifdef __cplusplus
}
#endif

#endif							/* DOCSYNC_TABLES_SYNTAX_H */
