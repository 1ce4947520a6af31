/*-------------------------------------------------------------------------
 *
 * options.c
 *		Parsing of the docsync output plugin's options, in one place, at slot start.
 *
 * Every option may be given once; unknown, duplicate and malformed options are errors that name the
 * option and say how to fix it. The `tables` option's grammar (names are resolved later, lazily, in
 * the change callback under the historic snapshot):
 *
 *		tables   := [ entry ( ',' entry )* ]
 *		entry    := relation [ '(' column ( ',' column )* ')' ]
 *		relation := OID-digits | [ identifier '.' ] identifier
 *		column   := attnum-digits (in an OID entry) | identifier (in a named entry)
 *
 * Identifiers follow SQL: double-quoted ones keep their case ("" is a quote inside), unquoted ones
 * fold to lower case. Whitespace around tokens is allowed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>

#include "commands/defrem.h"
#include "lib/stringinfo.h"
#include "parser/scansup.h"
#include "utils/builtins.h"

#include "docsync_wire.h"
#include "plugin.h"

/* The `tables` tokenizer's position in the option string. */
typedef struct TablesCursor
{
	const char *start;			/* the whole option value, for error positions */
	const char *p;				/* next unread byte */
} TablesCursor;

static void option_once(bool *seen, DefElem *elem);
static bool option_bool(DefElem *elem);
static void tables_error(TablesCursor *cur, const char *what) pg_attribute_noreturn();
static void skip_space(TablesCursor *cur);
static bool parse_number(TablesCursor *cur, const char *what, long max, long *result);
static char *parse_identifier(TablesCursor *cur, const char *what);

/* Parses the plugin options into *options; defaults first, then each option once. */
void
docsync_parse_options(DocsyncOptions *options, List *defelems)
{
	ListCell   *lc;
	bool		seen_proto = false;
	bool		seen_format = false;
	bool		seen_messages = false;
	bool		seen_origin = false;
	bool		seen_tables = false;

	options->proto_version = DOCSYNC_PROTO_VERSION_MAX;
	options->binary = true;
	options->messages = true;
	options->origin_none = false;
	options->tables = NIL;

	foreach(lc, defelems)
	{
		DefElem    *elem = lfirst(lc);
		char	   *value = elem->arg ? strVal(elem->arg) : NULL;

		if (strcmp(elem->defname, "proto_version") == 0)
		{
			char	   *end;
			long		v;

			option_once(&seen_proto, elem);
			errno = 0;
			v = value ? strtol(value, &end, 10) : 0;
			if (value == NULL || *value == '\0' || *end != '\0' || errno != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value \"%s\" for docsync option \"proto_version\"",
								value ? value : ""),
						 errhint("Pass a whole number between %d and %d.",
								 DOCSYNC_PROTO_VERSION_MIN, DOCSYNC_PROTO_VERSION_MAX)));
			if (v < DOCSYNC_PROTO_VERSION_MIN || v > DOCSYNC_PROTO_VERSION_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("docsync wire protocol version %ld is not supported", v),
						 errdetail("This server's docsync speaks versions %d to %d.",
								   DOCSYNC_PROTO_VERSION_MIN, DOCSYNC_PROTO_VERSION_MAX),
						 errhint("Upgrade the docsync extension or the worker so that they share a version.")));
			options->proto_version = (int) v;
		}
		else if (strcmp(elem->defname, "format") == 0)
		{
			option_once(&seen_format, elem);
			if (value != NULL && strcmp(value, "binary") == 0)
				options->binary = true;
			else if (value != NULL && strcmp(value, "text") == 0)
				options->binary = false;
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value \"%s\" for docsync option \"format\"", value ? value : ""),
						 errhint("Use \"binary\" or \"text\".")));
		}
		else if (strcmp(elem->defname, "messages") == 0)
		{
			option_once(&seen_messages, elem);
			options->messages = option_bool(elem);
		}
		else if (strcmp(elem->defname, "origin") == 0)
		{
			option_once(&seen_origin, elem);
			if (value != NULL && strcmp(value, "any") == 0)
				options->origin_none = false;
			else if (value != NULL && strcmp(value, "none") == 0)
				options->origin_none = true;
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value \"%s\" for docsync option \"origin\"", value ? value : ""),
						 errhint("Use \"any\" to emit every change or \"none\" to skip changes replicated from elsewhere.")));
		}
		else if (strcmp(elem->defname, "tables") == 0)
		{
			option_once(&seen_tables, elem);
			options->tables = docsync_parse_tables(value ? value : "");
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unrecognized docsync option \"%s\"", elem->defname),
					 errhint("Valid options are tables, format, proto_version, messages and origin.")));
	}
}

/* Parses the `tables` option value into a list of DocsyncTableEntry. */
List *
docsync_parse_tables(const char *value)
{
	TablesCursor cur;
	List	   *entries = NIL;

	cur.start = value;
	cur.p = value;
	skip_space(&cur);
	if (*cur.p == '\0')
		return NIL;

	for (;;)
	{
		DocsyncTableEntry *entry = palloc0(sizeof(DocsyncTableEntry));
		bool		by_oid;

		skip_space(&cur);
		by_oid = isdigit((unsigned char) *cur.p);
		if (by_oid)
		{
			long		oid;
			const char *at = cur.p;

			if (!parse_number(&cur, "relation OID", (long) UINT_MAX, &oid) || oid == 0)
			{
				cur.p = at;
				tables_error(&cur, "a relation OID between 1 and 4294967295");
			}
			entry->relid = (Oid) oid;
		}
		else
		{
			char	   *first = parse_identifier(&cur, "a relation OID or name");

			skip_space(&cur);
			if (*cur.p == '.')
			{
				cur.p++;
				skip_space(&cur);
				entry->schema = first;
				entry->name = parse_identifier(&cur, "a relation name after the schema");
			}
			else
				entry->name = first;
		}

		skip_space(&cur);
		if (*cur.p == '(')
		{
			cur.p++;
			for (;;)
			{
				DocsyncTableColumn *column = palloc0(sizeof(DocsyncTableColumn));

				skip_space(&cur);
				if (by_oid)
				{
					long		attnum;
					const char *at = cur.p;

					if (!parse_number(&cur, "attnum", MaxAttrNumber, &attnum) || attnum < 1)
					{
						cur.p = at;
						tables_error(&cur, "a column number (attnum, 1 or more) in an OID entry");
					}
					column->attnum = (AttrNumber) attnum;
				}
				else
					column->name = parse_identifier(&cur, "a column name");
				entry->columns = lappend(entry->columns, column);
				skip_space(&cur);
				if (*cur.p == ',')
				{
					cur.p++;
					continue;
				}
				if (*cur.p == ')')
				{
					cur.p++;
					break;
				}
				tables_error(&cur, "\",\" or \")\" in a column list");
			}
		}
		entries = lappend(entries, entry);

		skip_space(&cur);
		if (*cur.p == '\0')
			break;
		if (*cur.p != ',')
			tables_error(&cur, "\",\" between entries, or \"(\" before a column list");
		cur.p++;
	}
	return entries;
}

/* Rejects a second occurrence of one option. */
static void
option_once(bool *seen, DefElem *elem)
{
	if (*seen)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("docsync option \"%s\" is given more than once", elem->defname),
				 errhint("Pass each option once.")));
	*seen = true;
}

/* A boolean option's value (true, false, on, off, 1, 0, …). */
static bool
option_bool(DefElem *elem)
{
	bool		result;
	char	   *value = elem->arg ? strVal(elem->arg) : NULL;

	if (value == NULL)
		return true;
	if (!parse_bool(value, &result))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value \"%s\" for docsync option \"%s\"", value, elem->defname),
				 errhint("Use a boolean: true or false.")));
	return result;
}

/* Reports a malformed `tables` value, with the position and what was expected there. */
static void
tables_error(TablesCursor *cur, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for docsync option \"tables\" at character %d: expected %s",
					(int) (cur->p - cur->start) + 1, what),
			 errdetail("The value is \"%s\".", cur->start),
			 errhint("Write entries like schema.table(column, ...) or OID(attnum, ...), separated by commas; "
					 "double-quote identifiers that need it.")));
}

static void
skip_space(TablesCursor *cur)
{
	while (*cur->p != '\0' && scanner_isspace(*cur->p))
		cur->p++;
}

/* Reads decimal digits no greater than max; false when there are none or too many. */
static bool
parse_number(TablesCursor *cur, const char *what, long max, long *result)
{
	long		v = 0;
	const char *p = cur->p;

	if (!isdigit((unsigned char) *p))
		return false;
	while (isdigit((unsigned char) *p))
	{
		v = v * 10 + (*p - '0');
		if (v > max)
			return false;
		p++;
	}
	cur->p = p;
	*result = v;
	return true;
}

/* Reads one SQL identifier: "quoted" (case kept, "" for a quote) or unquoted (folded to lower case). */
static char *
parse_identifier(TablesCursor *cur, const char *what)
{
	const char *p = cur->p;

	if (*p == '"')
	{
		StringInfoData buf;

		initStringInfo(&buf);
		p++;
		for (;;)
		{
			if (*p == '\0')
			{
				cur->p = p;
				tables_error(cur, "a closing double quote");
			}
			if (*p == '"')
			{
				if (p[1] == '"')
				{
					appendStringInfoChar(&buf, '"');
					p += 2;
					continue;
				}
				p++;
				break;
			}
			appendStringInfoChar(&buf, *p);
			p++;
		}
		if (buf.len == 0)
		{
			cur->p = p - 2;
			tables_error(cur, "a non-empty quoted identifier");
		}
		cur->p = p;
		return buf.data;
	}
	if (isalpha((unsigned char) *p) || *p == '_' || IS_HIGHBIT_SET(*p))
	{
		const char *begin = p;

		while (isalnum((unsigned char) *p) || *p == '_' || *p == '$' || IS_HIGHBIT_SET(*p))
			p++;
		cur->p = p;
		return downcase_identifier(begin, p - begin, false, false);
	}
	tables_error(cur, what);
}
