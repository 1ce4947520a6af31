/*-------------------------------------------------------------------------
 *
 * options.c
 *		Parsing of the docsync output plugin's options, in one place, at slot start.
 *
 * Every option may be given once; unknown, duplicate and malformed options are errors that name the
 * option and say how to fix it. The `tables` option's grammar is in tables_syntax.h; its parser
 * (tables_syntax.c) makes no server calls, so the worker's tests and a fuzz target run the same
 * code. Here its findings become DocsyncTableEntry lists (names are resolved later, lazily, in the
 * change callback under the historic snapshot): unquoted identifiers fold to lower case.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "lib/stringinfo.h"
#include "parser/scansup.h"
#include "utils/builtins.h"

#include "docsync_wire.h"
#include "plugin.h"
#include "tables_syntax.h"

StaticAssertDecl(DOCSYNC_TABLES_MAX_ATTNUM == MaxAttrNumber, "the tables grammar caps attnums at MaxAttrNumber");

static void option_once(bool *seen, DefElem *elem);
static bool option_bool(DefElem *elem);
static bool option_choice(DefElem *elem, const char *when_true, const char *when_false, const char *hint);

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
			options->binary = option_choice(elem, "binary", "text", "Use \"binary\" or \"text\".");
		}
		else if (strcmp(elem->defname, "messages") == 0)
		{
			option_once(&seen_messages, elem);
			options->messages = option_bool(elem);
		}
		else if (strcmp(elem->defname, "origin") == 0)
		{
			option_once(&seen_origin, elem);
			options->origin_none = option_choice(elem, "none", "any",
												 "Use \"any\" to emit every change or \"none\" to skip changes replicated from elsewhere.");
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

/* Builds the plugin's entries from what the grammar (tables_syntax.c) reports. */
typedef struct TablesBuilder
{
	List	   *entries;		/* DocsyncTableEntry * */
	DocsyncTableEntry *current;	/* the last entry, which columns go to */
} TablesBuilder;

/* An identifier's name: quoted ones as written ("" unescaped), unquoted ones folded. */
static char *
identifier_name(const DocsyncTablesIdent *ident)
{
	char	   *text;

	if (!ident->quoted)
		return downcase_identifier(ident->start, (int) ident->len, false, false);
	text = palloc(ident->len + 1);
	docsync_tables_ident_text(ident, text);
	return text;
}

static DocsyncTableEntry *
add_entry(TablesBuilder *builder)
{
	builder->current = palloc0(sizeof(DocsyncTableEntry));
	builder->entries = lappend(builder->entries, builder->current);
	return builder->current;
}

static void
add_relid(void *arg, uint32_t relid)
{
	add_entry(arg)->relid = (Oid) relid;
}

static void
add_relname(void *arg, const DocsyncTablesIdent *schema, const DocsyncTablesIdent *name)
{
	DocsyncTableEntry *entry = add_entry(arg);

	entry->schema = schema ? identifier_name(schema) : NULL;
	entry->name = identifier_name(name);
}

static void
add_attnum(void *arg, int attnum)
{
	TablesBuilder *builder = arg;
	DocsyncTableColumn *column = palloc0(sizeof(DocsyncTableColumn));

	column->attnum = (AttrNumber) attnum;
	builder->current->columns = lappend(builder->current->columns, column);
}

static void
add_column(void *arg, const DocsyncTablesIdent *name)
{
	TablesBuilder *builder = arg;
	DocsyncTableColumn *column = palloc0(sizeof(DocsyncTableColumn));

	column->name = identifier_name(name);
	builder->current->columns = lappend(builder->current->columns, column);
}

static bool
tables_isspace(char c)
{
	return scanner_isspace(c);
}

/* Parses the `tables` option value into a list of DocsyncTableEntry. */
List *
docsync_parse_tables(const char *value)
{
	static const DocsyncTablesVisitor visitor = {
		.relid = add_relid,
		.relname = add_relname,
		.attnum = add_attnum,
		.column = add_column,
		.is_space = tables_isspace,
	};
	TablesBuilder builder = {NIL, NULL};
	DocsyncTablesError error;

	if (!docsync_tables_parse(value, &visitor, &builder, &error))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for docsync option \"tables\" at character %d: expected %s",
						(int) error.offset + 1, error.expected),
				 errdetail("The value is \"%s\".", value),
				 errhint("Write entries like schema.table(column, ...) or OID(attnum, ...), separated by commas; "
						 "double-quote identifiers that need it.")));
	return builder.entries;
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

/* An option with two words for its values: true for when_true, false for when_false. */
static bool
option_choice(DefElem *elem, const char *when_true, const char *when_false, const char *hint)
{
	char	   *value = elem->arg ? strVal(elem->arg) : NULL;

	if (value != NULL && strcmp(value, when_true) == 0)
		return true;
	if (value != NULL && strcmp(value, when_false) == 0)
		return false;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value \"%s\" for docsync option \"%s\"", value ? value : "", elem->defname),
			 errhint("%s", hint)));
	pg_unreachable();
}
