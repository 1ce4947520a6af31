/*-------------------------------------------------------------------------
 *
 * tables_syntax.c
 *		The `tables` option's tokenizer and parser (grammar in tables_syntax.h). No server calls:
 *		it reports what it finds to a visitor and where it stopped, and the caller allocates,
 *		folds names and raises errors.
 *
 *-------------------------------------------------------------------------
 */
#include "tables_syntax.h"

#include <string.h>

/* Parser state: the value, the next unread byte and the caller's visitor. */
typedef struct Cursor
{
	const char *start;
	const char *p;
	const DocsyncTablesVisitor *visitor;
	void	   *arg;
	DocsyncTablesError *error;
} Cursor;

static bool
pg15_isspace(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* First byte of an unquoted identifier: an ASCII letter, '_' or any byte of a multibyte character. */
static bool
is_ident_start(char c)
{
	unsigned char u = (unsigned char) c;

	return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_' || u >= 0x80;
}

static bool
is_ident_cont(char c)
{
	return is_ident_start(c) || is_digit(c) || c == '$';
}

static bool
fail(Cursor *cur, const char *at, const char *expected)
{
	cur->error->offset = (size_t) (at - cur->start);
	cur->error->expected = expected;
	return false;
}

static void
skip_space(Cursor *cur)
{
	bool		(*space) (char) = cur->visitor->is_space ? cur->visitor->is_space : pg15_isspace;

	while (*cur->p != '\0' && space(*cur->p))
		cur->p++;
}

/* Reads decimal digits no greater than max; false when there are none or too many. */
static bool
parse_number(Cursor *cur, long max, long *result)
{
	long		v = 0;
	const char *p = cur->p;

	if (!is_digit(*p))
		return false;
	while (is_digit(*p))
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

/* Reads one identifier into *ident; `what` names what was expected when there is none. */
static bool
parse_identifier(Cursor *cur, const char *what, DocsyncTablesIdent *ident)
{
	const char *p = cur->p;

	if (*p == '"')
	{
		const char *begin = ++p;

		for (;;)
		{
			if (*p == '\0')
				return fail(cur, p, "a closing double quote");
			if (*p == '"')
			{
				if (p[1] == '"')
				{
					p += 2;
					continue;
				}
				break;
			}
			p++;
		}
		if (p == begin)
			return fail(cur, begin - 1, "a non-empty quoted identifier");
		ident->start = begin;
		ident->len = (size_t) (p - begin);
		ident->quoted = true;
		cur->p = p + 1;
		return true;
	}
	if (is_ident_start(*p))
	{
		const char *begin = p;

		while (is_ident_cont(*p))
			p++;
		ident->start = begin;
		ident->len = (size_t) (p - begin);
		ident->quoted = false;
		cur->p = p;
		return true;
	}
	return fail(cur, p, what);
}

/* One entry: a relation, then its optional column list. */
static bool
parse_entry(Cursor *cur)
{
	bool		by_oid;

	skip_space(cur);
	by_oid = is_digit(*cur->p);
	if (by_oid)
	{
		long		oid;
		const char *at = cur->p;

		if (!parse_number(cur, (long) UINT32_MAX, &oid) || oid == 0)
			return fail(cur, at, "a relation OID between 1 and 4294967295");
		cur->visitor->relid(cur->arg, (uint32_t) oid);
	}
	else
	{
		DocsyncTablesIdent first;
		DocsyncTablesIdent second;

		if (!parse_identifier(cur, "a relation OID or name", &first))
			return false;
		skip_space(cur);
		if (*cur->p == '.')
		{
			cur->p++;
			skip_space(cur);
			if (!parse_identifier(cur, "a relation name after the schema", &second))
				return false;
			cur->visitor->relname(cur->arg, &first, &second);
		}
		else
			cur->visitor->relname(cur->arg, NULL, &first);
	}

	skip_space(cur);
	if (*cur->p != '(')
		return true;
	cur->p++;
	for (;;)
	{
		skip_space(cur);
		if (by_oid)
		{
			long		attnum;
			const char *at = cur->p;

			if (!parse_number(cur, DOCSYNC_TABLES_MAX_ATTNUM, &attnum) || attnum < 1)
				return fail(cur, at, "a column number (attnum, 1 or more) in an OID entry");
			cur->visitor->attnum(cur->arg, (int) attnum);
		}
		else
		{
			DocsyncTablesIdent column;

			if (!parse_identifier(cur, "a column name", &column))
				return false;
			cur->visitor->column(cur->arg, &column);
		}
		skip_space(cur);
		if (*cur->p == ',')
		{
			cur->p++;
			continue;
		}
		if (*cur->p == ')')
		{
			cur->p++;
			return true;
		}
		return fail(cur, cur->p, "\",\" or \")\" in a column list");
	}
}

bool
docsync_tables_parse(const char *value, const DocsyncTablesVisitor *visitor, void *arg,
					 DocsyncTablesError *error)
{
	Cursor		cur;

	cur.start = value;
	cur.p = value;
	cur.visitor = visitor;
	cur.arg = arg;
	cur.error = error;
	skip_space(&cur);
	if (*cur.p == '\0')
		return true;
	for (;;)
	{
		if (!parse_entry(&cur))
			return false;
		skip_space(&cur);
		if (*cur.p == '\0')
			return true;
		if (*cur.p != ',')
			return fail(&cur, cur.p, "\",\" between entries, or \"(\" before a column list");
		cur.p++;
	}
}

size_t
docsync_tables_ident_text(const DocsyncTablesIdent *ident, char *out)
{
	size_t		n = 0;
	size_t		i;

	for (i = 0; i < ident->len; i++)
	{
		out[n++] = ident->start[i];
		if (ident->quoted && ident->start[i] == '"')
			i++;				/* "" inside quotes is one quote */
	}
	out[n] = '\0';
	return n;
}
