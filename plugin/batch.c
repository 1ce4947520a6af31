/*-------------------------------------------------------------------------
 *
 * batch.c
 *		The batched form of a doc or keys query: one statement that computes it for many parameter
 *		sets, which the worker runs instead of one statement per doc.
 *		- docsync.batch_sql(): the statement, or NULL when the query has none;
 *		- docsync.batch_problem(): why the query has none (shown as "not batched" in
 *		  docsync.queries), or NULL.
 *
 *		A batched doc must equal the doc computed alone, for every param type: the statement names
 *		each param's type without a type modifier (so char and bit keep their length), reaches a
 *		composite param by subscript (so ROWS FROM cannot spread its fields over the ordinal), finds
 *		the params with PostgreSQL's own lexer and picks an alias no identifier of the query spells,
 *		Unicode escapes decoded. Where it could not be exact the query has no batched form, and says
 *		why.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/keywords.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "parser/scanner.h"
/* the token codes of the core scanner; after scanner.h, which defines YYLTYPE */
#include "parser/gram.h"
#include "definer.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(docsync_batch_sql);
PG_FUNCTION_INFO_V1(docsync_batch_problem);

/* A query's batched form, or why it has none. */
typedef struct BatchForm
{
	char	   *sql;			/* the batched statement; NULL when there is none */
	char	   *problem;		/* why there is none; NULL when there is one */
} BatchForm;

/* helpers */
static BatchForm batch_form(Oid role, const char *sql, const char *search_path);
static BatchForm batch_form_of_call(FunctionCallInfo fcinfo);
static char *param_type_problem(int k, Oid type);
static char *array_type_name(Oid type);
static List *query_identifiers(const char *stmt, bool *unreadable);
static char *decode_unicode_identifier(const char *body, char escape);
static bool contains_ascii_ci(const char *haystack, const char *needle);
static void append_params_replaced(StringInfo buf, const char *stmt, const char *alias, int nparams,
								   const char *const *param_arrays, const bool *by_subscript);

/*
 * Why param $k of this type cannot travel as an element of the array the batched statement spreads,
 * or NULL. It needs an array type, and must not be a pseudo-type (cstring has an array type, but its
 * values are no data a query holds). An array, or a domain over one, cannot: its values would be the
 * rows of a two-dimensional array, which unnest flattens into single elements. And the worker writes
 * each array literal with ',' between the elements, which a type whose array delimiter is another
 * (box uses ';') would misread.
 */
static char *
param_type_problem(int k, Oid type)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	char		typdelim;
	Oid			typioparam;
	Oid			typinput;

	if (get_typtype(type) == TYPTYPE_PSEUDO)
		return psprintf("param $%d is of pseudo-type %s", k, format_type_be(type));
	if (OidIsValid(get_element_type(type)) || type_is_array_domain(type))
		return psprintf("param $%d is an array (%s): a batch of arrays is a two-dimensional array, which the batched form would flatten",
						k, format_type_be(type));
	if (!OidIsValid(get_array_type(type)))
		return psprintf("param $%d is of type %s, which has no array type", k, format_type_be(type));
	get_type_io_data(type, IOFunc_input, &typlen, &typbyval, &typalign, &typdelim, &typioparam,
					 &typinput);
	if (typdelim != ',')
		return psprintf("param $%d is of type %s, whose array elements are separated by '%c', not ','",
						k, format_type_be(type), typdelim);
	return NULL;
}

/*
 * The array type of a param's type, as the batched statement casts to it: "schema.name[]" with both
 * names quoted as identifiers, so that no SQL-standard spelling applies a type modifier (the
 * standard's character[] is char(1)[] and bit[] is bit(1)[]). The param alone has no modifier
 * either: analysis infers none.
 */
static char *
array_type_name(Oid type)
{
	HeapTuple	tuple;
	Form_pg_type form;
	char	   *name;

	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for type %u", type);
	form = (Form_pg_type) GETSTRUCT(tuple);
	name = psprintf("%s[]", quote_qualified_identifier(get_namespace_name(form->typnamespace),
													   NameStr(form->typname)));
	ReleaseSysCache(tuple);
	return name;
}

/* Whether needle (ASCII) occurs in haystack, ignoring case as unquoted identifiers do. */
static bool
contains_ascii_ci(const char *haystack, const char *needle)
{
	size_t		n = strlen(needle);
	const char *p;

	for (p = haystack; *p; p++)
		if (pg_strncasecmp(p, needle, n) == 0)
			return true;
	return false;
}

/*
 * The body of a U&"…" identifier with its escapes decoded: e followed by four hex digits, e+ by six,
 * ee for e itself. Only ASCII matters to the alias check, so any other code point becomes byte 0x01,
 * which no alias holds. NULL when an escape is malformed (the server refuses the query then anyway).
 */
static char *
decode_unicode_identifier(const char *body, char escape)
{
	StringInfoData out;
	const char *p = body;

	initStringInfo(&out);
	while (*p)
	{
		int			digits;
		unsigned int code = 0;
		int			i;

		if (*p != escape)
		{
			appendStringInfoChar(&out, *p++);
			continue;
		}
		if (p[1] == escape)
		{
			appendStringInfoChar(&out, escape);
			p += 2;
			continue;
		}
		digits = p[1] == '+' ? 6 : 4;
		p += p[1] == '+' ? 2 : 1;
		for (i = 0; i < digits; i++, p++)
		{
			if (!isxdigit((unsigned char) *p))
				return NULL;
			code = code * 16 + (isdigit((unsigned char) *p) ? *p - '0' : (tolower((unsigned char) *p) - 'a' + 10));
		}
		appendStringInfoChar(&out, code > 0 && code < 0x80 ? (char) code : '\x01');
	}
	return out.data;
}

/*
 * Every identifier of a statement as the parser reads it: plain and quoted ones as the lexer returns
 * them, U&"…" ones with their escapes decoded (UESCAPE honoured). *unreadable is set when a U&
 * identifier cannot be decoded.
 */
static List *
query_identifiers(const char *stmt, bool *unreadable)
{
	core_yyscan_t yyscanner;
	core_yy_extra_type yyextra;
	core_YYSTYPE yylval;
	YYLTYPE		yylloc;
	List	   *out = NIL;
	char	   *pending = NULL; /* a U&"…" body whose UESCAPE may follow */
	bool		after_uescape = false;
	int			token;

	*unreadable = false;
	yyscanner = scanner_init(stmt, &yyextra, &ScanKeywords, ScanKeywordTokens);
	yyextra.escape_string_warning = false;
	while ((token = core_yylex(&yylval, &yylloc, yyscanner)) != 0)
	{
		if (pending != NULL && token == UESCAPE && !after_uescape)
		{
			after_uescape = true;
			continue;
		}
		if (pending != NULL)
		{
			char		escape = after_uescape && token == SCONST && yylval.str[0] ? yylval.str[0] : '\\';
			char	   *decoded = decode_unicode_identifier(pending, escape);

			if (decoded == NULL)
				*unreadable = true;
			else
				out = lappend(out, decoded);
			pending = NULL;
			if (after_uescape)
			{
				after_uescape = false;
				continue;
			}
		}
		if (token == IDENT)
			out = lappend(out, pstrdup(yylval.str));
		else if (token == UIDENT)
			pending = pstrdup(yylval.str);
	}
	if (pending != NULL)
	{
		char	   *decoded = decode_unicode_identifier(pending, '\\');

		if (decoded == NULL)
			*unreadable = true;
		else
			out = lappend(out, decoded);
	}
	scanner_finish(yyscanner);
	return out;
}

/*
 * Appends the statement with every parameter $k replaced by (alias.pk), or for a param reached by
 * subscript, by ((param_arrays[k])[alias.pk]). PostgreSQL's own lexer finds the parameters, so a "$1"
 * inside a string literal (plain, E'', dollar-quoted), a quoted identifier or a comment is text like
 * any other and stays as it is. The statement has been parsed already, so the lexer raises nothing.
 */
static void
append_params_replaced(StringInfo buf, const char *stmt, const char *alias, int nparams,
					   const char *const *param_arrays, const bool *by_subscript)
{
	core_yyscan_t yyscanner;
	core_yy_extra_type yyextra;
	core_YYSTYPE yylval;
	YYLTYPE		yylloc;
	int			copied = 0;
	int			token;

	yyscanner = scanner_init(stmt, &yyextra, &ScanKeywords, ScanKeywordTokens);
	/* the parse warned once already about any backslash in a string when it had to */
	yyextra.escape_string_warning = false;
	while ((token = core_yylex(&yylval, &yylloc, yyscanner)) != 0)
	{
		int			end;
		int			k;

		if (token != PARAM)
			continue;
		k = yylval.ival;
		/* analysis typed exactly the parameters the text uses, $1 to $n */
		if (k < 1 || k > nparams)
			elog(ERROR, "docsync.batch_sql: parameter $%d in a query analysed with %d parameters", k, nparams);
		/* the token is '$' and the number's digits ('_' may separate them from PostgreSQL 16 on) */
		end = yylloc + 1;
		while (isdigit((unsigned char) stmt[end]) || stmt[end] == '_')
			end++;
		appendBinaryStringInfo(buf, stmt + copied, yylloc - copied);
		if (by_subscript[k - 1])
			appendStringInfo(buf, "(($%d::%s)[%s.p%d])", k, param_arrays[k - 1], alias, k);
		else
			appendStringInfo(buf, "(%s.p%d)", alias, k);
		copied = end;
	}
	scanner_finish(yyscanner);
	appendStringInfoString(buf, stmt + copied);
}

/*
 * The batched form of a doc or keys query: one statement that runs it for m parameter sets at once.
 * Its parameter $k holds the k-th parameter of every set, as a one-dimensional array of that
 * parameter's type (every array m long); it returns, ordinal by ordinal, one row (ord, NULL, NULLs)
 * for a set the query returned no row for, or else one row (ord, 1, the query's columns) per row it
 * returned. It reads
 *
 *   SELECT A.ord, d.* FROM ROWS FROM (pg_catalog.unnest($1::s1.t1[]), …) WITH ORDINALITY AS A(p1, …, pn, ord)
 *     LEFT JOIN LATERAL (SELECT 1 AS present, q.* FROM (
 *   <the query, every $k replaced by (A.pk)>
 *   ) AS q) AS d ON true
 *    ORDER BY A.ord
 *
 * where A is docsync_batch, or docsync_batch_<i> when the query's text or any of its identifiers
 * (decoded) mentions that name in any case, so none of its own aliases can hide A from the lateral
 * references. A composite param (or a domain over one) would have its fields spread over columns by
 * ROWS FROM, shifting the ordinal: its item is pg_catalog.generate_subscripts($k::s.t[], 1) instead,
 * and $k becomes (($k::s.t[])[A.pk]), the value itself, NULL and all-NULL rows apart. The types are
 * schema-qualified, quoted names without modifiers (see array_type_name), and unnest is
 * pg_catalog's (ROWS FROM spells the multi-argument unnest, which only an unqualified name would
 * expand), so the statement means the same under any search_path; the query itself resolves as it
 * does when run alone. The query's text stands on lines of its own, so a trailing -- comment ends
 * before the closing parenthesis; a trailing ';' is left out.
 */
static BatchForm
batch_form(Oid role, const char *sql, const char *search_path)
{
	BatchForm	form = {NULL, NULL};
	Oid		   *param_types = NULL;
	int			nparams = 0;
	RawStmt    *parsed = NULL;
	char	   *stmt;
	char	   *alias;
	char	  **param_arrays;
	bool	   *by_subscript;
	List	   *identifiers;
	bool		unreadable;
	StringInfoData buf;
	int			suffix;
	int			i;

	(void) docsync_analyze_select(role, sql, search_path, &param_types, &nparams, &parsed);
	if (nparams == 0)
	{
		form.problem = pstrdup("it has no params: it computes one doc");
		return form;
	}
	param_arrays = palloc0(sizeof(char *) * nparams);
	by_subscript = palloc0(sizeof(bool) * nparams);
	for (i = 0; i < nparams; i++)
	{
		/* an untyped parameter, should analysis leave one, is text, as an untyped literal is */
		if (param_types[i] == UNKNOWNOID)
			param_types[i] = TEXTOID;
		if ((form.problem = param_type_problem(i + 1, param_types[i])) != NULL)
			return form;
		param_arrays[i] = array_type_name(param_types[i]);
		by_subscript[i] = type_is_rowtype(param_types[i]);
	}

	/* the statement alone (stmt_len 0: to the end), without the ';' that may end it */
	stmt = parsed->stmt_len > 0 ? pnstrdup(sql + parsed->stmt_location, parsed->stmt_len)
		: pstrdup(sql + parsed->stmt_location);

	identifiers = query_identifiers(stmt, &unreadable);
	if (unreadable)
	{
		form.problem = pstrdup("a U&\"…\" identifier of the query has an escape that cannot be read");
		return form;
	}
	alias = pstrdup("docsync_batch");
	for (suffix = 1;; suffix++)
	{
		ListCell   *lc;
		bool		taken = contains_ascii_ci(sql, alias);

		foreach(lc, identifiers)
			taken = taken || contains_ascii_ci((const char *) lfirst(lc), alias);
		if (!taken)
			break;
		alias = psprintf("docsync_batch_%d", suffix);
	}

	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT %s.ord, d.* FROM ROWS FROM (", alias);
	for (i = 0; i < nparams; i++)
		appendStringInfo(&buf, "%spg_catalog.%s($%d::%s%s)", i > 0 ? ", " : "",
						 by_subscript[i] ? "generate_subscripts" : "unnest", i + 1, param_arrays[i],
						 by_subscript[i] ? ", 1" : "");
	appendStringInfo(&buf, ") WITH ORDINALITY AS %s(", alias);
	for (i = 0; i < nparams; i++)
		appendStringInfo(&buf, "p%d, ", i + 1);
	appendStringInfoString(&buf, "ord)\n  LEFT JOIN LATERAL (SELECT 1 AS present, q.* FROM (\n");
	append_params_replaced(&buf, stmt, alias, nparams, (const char *const *) param_arrays, by_subscript);
	appendStringInfo(&buf, "\n) AS q) AS d ON true\n ORDER BY %s.ord", alias);
	form.sql = buf.data;
	return form;
}

/* batch_form of a call's (sql text, search_path text, definer regrole) arguments. */
static BatchForm
batch_form_of_call(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query text must not be null"),
				 errdetail("A docsync doc or keys query is one SELECT statement."),
				 errhint("Pass the query text.")));
	return batch_form(docsync_text_role(fcinfo, 2), text_to_cstring(PG_GETARG_TEXT_PP(0)),
					  PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)));
}

/*
 * docsync.batch_sql(sql text, search_path text, definer regrole) RETURNS text
 *
 * The batched form of a doc or keys query (batch_form), or NULL when it has none: the worker then
 * computes its docs one by one. Nothing is executed.
 */
Datum
docsync_batch_sql(PG_FUNCTION_ARGS)
{
	BatchForm	form = batch_form_of_call(fcinfo);

	if (form.sql == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(form.sql));
}

/*
 * docsync.batch_problem(sql text, search_path text, definer regrole) RETURNS text
 *
 * Why a doc or keys query has no batched form, or NULL when it has one. Nothing is executed.
 */
Datum
docsync_batch_problem(PG_FUNCTION_ARGS)
{
	BatchForm	form = batch_form_of_call(fcinfo);

	if (form.problem == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(form.problem));
}
