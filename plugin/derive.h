/*-------------------------------------------------------------------------
 *
 * derive.h
 *		The analysis behind derived watches (docsync.derive_watches): the relation occurrences of a
 *		rewritten query, the equalities that hold for each one's contributing rows (derive_walk.c),
 *		and from them each occurrence's cheapest sound watch (derive_path.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_DERIVE_H
#define DOCSYNC_DERIVE_H

#include "nodes/bitmapset.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "utils/hsearch.h"

/* One reference to a table in the query tree (a range table entry), with what is known of its rows. */
typedef struct DeriveOcc
{
	int			id;				/* 0-based, in order of discovery */
	RangeTblEntry *rte;			/* identity: the entry in the rewritten query tree */
	Oid			relid;
	const char *alias;			/* the name the query gives it (for why) */
	bool		placed;			/* reached by the join tree walk (its equalities are known) */
	List	   *edges;			/* DeriveEdge *: the equalities every contributing row satisfies */
	List	   *notes;			/* char *: why conditions around it did not reach it (for why) */
	const char *broadcast_why;	/* non-null: broadcast whatever the equalities say, for this reason */
	List	   *picked_by;		/* Query *: blocks around it whose LIMIT, DISTINCT ON … pick its rows */
} DeriveOcc;

/* One side of an equality: a column of an occurrence, a doc param, or something else (opaque). */
typedef enum DeriveTermKind
{
	DERIVE_OPAQUE,
	DERIVE_PARAM,
	DERIVE_COLUMN
} DeriveTermKind;

typedef struct DeriveTerm
{
	DeriveTermKind kind;
	int			param;			/* DERIVE_PARAM: $n */
	DeriveOcc  *occ;			/* DERIVE_COLUMN */
	AttrNumber	attno;
	Oid			type;			/* the column's type (DERIVE_COLUMN) */
	List	   *via;			/* RangeTblEntry *: subqueries and CTEs the column came out of */
} DeriveTerm;

/* left = right under a btree equality operator. */
typedef struct DeriveEdge
{
	int			id;				/* 0-based, in order of creation */
	DeriveTerm	left;
	DeriveTerm	right;
	Oid			opno;
} DeriveEdge;

/* What one table of the query is read for (all occurrences and function bodies together). */
typedef struct DeriveRead
{
	Oid			relid;
	Bitmapset  *columns;		/* attnos, offset by FirstLowInvalidHeapAttributeNumber */
	bool		all;			/* a whole-row or system column reference: every column */
} DeriveRead;

/* A function the analysis cannot see into, or a read no watch can follow (funcid invalid). */
typedef struct DeriveUncovered
{
	Oid			funcid;
	const char *why;
} DeriveUncovered;

/*
 * Bounds of the analysis: beyond them an occurrence is broadcast, its why naming the bound, so that
 * no query makes a derivation (run by define_query, and again by DDL) cost more than a fraction of a
 * second.
 */
#define DERIVE_MAX_OCCURRENCES 200	/* table occurrences of one query */
#define DERIVE_MAX_EDGES 400		/* equalities that hold for one occurrence's rows */
#define DERIVE_MAX_PATH 12			/* tables of a keys query's join path */

typedef struct DeriveState
{
	int			nparams;
	Oid		   *param_types;	/* the doc params' types ($1 at [0]) */
	List	   *occs;			/* DeriveOcc *, in order of discovery */
	HTAB	   *occ_index;		/* occs by RangeTblEntry * (docsync_derive_map_find) */
	int			nedges;			/* DeriveEdges made */
	List	   *reads;			/* DeriveRead * */
	List	   *uncovered;		/* DeriveUncovered * */
	List	   *functions_seen; /* OIDs of the functions checked already */
	List	   *types_seen;		/* OIDs of the types checked already (derive_cover.c) */
	List	   *defaults_seen;	/* the default arguments walked already (derive_cover.c) */
	const char *in_function;	/* while walking a SQL function's body: its name */
	int			depth;			/* nesting of function bodies */
	int			unordered;		/* > 0: every table read now is read whole (a function's body called
								 * below a block whose result depends on row order) */
} DeriveState;

/* One derived watch (or uncovered function), as docsync.derive_watches returns it. */
typedef struct DeriveRow
{
	Oid			relid;			/* InvalidOid for an uncovered function */
	Oid			read_relid;		/* the table whose read columns it lists (an inheritance parent's) */
	const char *kind;			/* direct, keys, broadcast, uncovered */
	List	   *columns;		/* char *: direct mapping, one per param */
	char	   *keys_sql;
	List	   *keys_args;		/* char * */
	char	   *why;
} DeriveRow;

/* The query levels around a point of the tree, innermost first (a Var's varlevelsup counts them). */
typedef struct DeriveLevel
{
	Query	   *query;
	struct DeriveLevel *up;
} DeriveLevel;

/* The state of one walk (derive_walk.c) that the equalities (derive_terms.c) read. */
typedef struct DeriveWalk
{
	DeriveState *state;
	DeriveLevel *stack;			/* the levels around the block being scanned */
	List	   *held;			/* DeriveEdge *: what holds for every row of the block being scanned */
	const char *broadcast_why;	/* set inside a recursive CTE or a function's body */
	bool		body;			/* walking a function's body: its params are not the doc's */
	List	   *ctes_walked;	/* CommonTableExpr * walked already */
	HTAB	   *walked;			/* Query * walked already (docsync_derive_map_find) */
	List	   *notes;			/* char *: the notes an occurrence placed now gets */
	List	   *pickers;		/* Query *: the picked_by an occurrence placed now gets */
	int			unordered_level;	/* 0, or the depth (the top block's is 1) of the outermost block
									 * around whose result depends on row order (derive_order.c) */
	HTAB	   *inner_edges;	/* Query * to what holds for its rows (List * of DeriveEdge *) */
} DeriveWalk;

/*
 * Maps from a node of the tree to a value, made at the first store, so that a lookup costs the same
 * at any number of occurrences (derive.c).
 */
extern bool docsync_derive_map_find(HTAB *map, const void *key, void **value);
extern void docsync_derive_map_store(HTAB **map, const void *key, void *value);

/* derive_terms.c */
extern Query *docsync_derive_level_query(DeriveLevel *stack, Index levelsup);
extern DeriveLevel *docsync_derive_stack_up(DeriveLevel *stack, Index levelsup);
extern DeriveLevel *docsync_derive_push(DeriveLevel *stack, Query *query);
extern DeriveOcc *docsync_derive_occurrence(DeriveState *state, RangeTblEntry *rte);
extern CommonTableExpr *docsync_derive_find_cte(DeriveLevel *stack, RangeTblEntry *rte, DeriveLevel **owner_stack);
extern bool docsync_derive_cte_transparent(CommonTableExpr *cte);
extern void docsync_derive_conjunct_edges(DeriveWalk *ctx, DeriveLevel *stack, Node *qual, Query *sublink,
										  List **edges);
extern List *docsync_derive_edges_not_via(List *edges, RangeTblEntry *rte);
extern List *docsync_derive_inner_edges(DeriveWalk *ctx, DeriveLevel *stack, Node *jtnode);
extern bool docsync_derive_term_of_block(const DeriveTerm *term, Query *block);
extern void docsync_derive_close_over_neighbours(DeriveState *state);

/* derive_walk.c */
extern void docsync_derive_walk(DeriveState *state, Query *query);
extern void docsync_derive_walk_body(DeriveState *state, Query *query, const char *function);

/* derive_order.c */
extern bool docsync_derive_order_dependent(Query *query);
extern bool docsync_derive_array_order_dependent(Query *sub);
extern void docsync_derive_record_read(DeriveState *state, Oid relid, bool column, AttrNumber attno, bool whole);
extern void docsync_derive_read_all(Node *node, DeriveState *state);

/* derive_path.c */
extern DeriveRow *docsync_derive_classify(DeriveState *state, DeriveOcc *occ);

/* derive_cover.c */
extern void docsync_derive_cover_node(DeriveState *state, Node *node);
extern const char *docsync_derive_undecoded(Oid relid);
extern const char *docsync_derive_catalog_uncovered(const char *proname, int nargs);

/* derive.c */
extern void docsync_derive_check_function(DeriveState *state, Oid funcid);
extern void docsync_derive_add_uncovered(DeriveState *state, Oid funcid, const char *why);
extern bool docsync_derive_sql_parses(const char *sql);

#endif							/* DOCSYNC_DERIVE_H */
