/*-------------------------------------------------------------------------
 *
 * compat.h
 *		Every difference between the PostgreSQL majors docsync supports (15 and newer), in one place.
 *		The rest of the plugin is written against the names defined here.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DOCSYNC_COMPAT_H
#define DOCSYNC_COMPAT_H

#include "catalog/pg_proc.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "parser/parsetree.h"
#include "replication/output_plugin.h"
#include "replication/reorderbuffer.h"
#include "utils/acl.h"

#if PG_VERSION_NUM < 150000
#error "docsync needs PostgreSQL 15 or newer"
#endif

/*
 * The old and new tuples of a change. PostgreSQL 17 stores a HeapTuple directly; earlier majors wrap
 * it in a ReorderBufferTupleBuf.
 */
#if PG_VERSION_NUM >= 170000
#define DOCSYNC_CHANGE_NEWTUPLE(change) ((change)->data.tp.newtuple)
#define DOCSYNC_CHANGE_OLDTUPLE(change) ((change)->data.tp.oldtuple)
#else
#define DOCSYNC_CHANGE_NEWTUPLE(change) \
	((change)->data.tp.newtuple ? &(change)->data.tp.newtuple->tuple : (HeapTuple) NULL)
#define DOCSYNC_CHANGE_OLDTUPLE(change) \
	((change)->data.tp.oldtuple ? &(change)->data.tp.oldtuple->tuple : (HeapTuple) NULL)
#endif

/* A logical decoding message. PostgreSQL 17 added whether to flush the WAL at once. */
#if PG_VERSION_NUM >= 170000
#define DOCSYNC_LOG_LOGICAL_MESSAGE(prefix, message, size, transactional) \
	LogLogicalMessage((prefix), (message), (size), (transactional), false)
#else
#define DOCSYNC_LOG_LOGICAL_MESSAGE(prefix, message, size, transactional) \
	LogLogicalMessage((prefix), (message), (size), (transactional))
#endif

/*
 * Progress reports. Before PostgreSQL 16 the output plugin itself must report progress, with a flag
 * saying whether the transaction was skipped, and must do so now and then inside long transactions
 * whose changes it filters out, or the walsender neither sends keepalives nor lets the slot advance.
 * From 16 on the server does both around the callbacks.
 */
#if PG_VERSION_NUM < 160000
#define DOCSYNC_REPORT_PROGRESS 1
#define docsync_update_progress(ctx, skipped_xact) OutputPluginUpdateProgress((ctx), (skipped_xact))
#else
#define DOCSYNC_REPORT_PROGRESS 0
#define docsync_update_progress(ctx, skipped_xact) ((void) 0)
#endif

/*
 * The relations one level of a rewritten query checks SELECT on as the user running it (not as a
 * view's owner), appended to relids: tables read directly, views (whose own tables are checked as
 * the view's owner) and the tables of security_invoker views. PostgreSQL 16 moved the permission
 * fields from the range table to Query.rteperminfos.
 */
static inline List *
docsync_query_checked_relations(Query *query, List *relids)
{
	ListCell   *lc;

#if PG_VERSION_NUM >= 160000
	foreach(lc, query->rteperminfos)
	{
		RTEPermissionInfo *perm = lfirst_node(RTEPermissionInfo, lc);

		if ((perm->requiredPerms & ACL_SELECT) && !OidIsValid(perm->checkAsUser))
			relids = list_append_unique_oid(relids, perm->relid);
	}
#else
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		if (rte->rtekind == RTE_RELATION && (rte->requiredPerms & ACL_SELECT) && !OidIsValid(rte->checkAsUser))
			relids = list_append_unique_oid(relids, rte->relid);
	}
#endif
	return relids;
}

/*
 * Raises the server's own "permission denied for table …" error unless the current user holds every
 * privilege one level of a rewritten query needs (checked as the view owner where a view says so).
 */
static inline void
docsync_check_query_permissions(Query *query)
{
#if PG_VERSION_NUM >= 160000
	(void) ExecCheckPermissions(query->rtable, query->rteperminfos, true);
#else
	(void) ExecCheckRTPerms(query->rtable, true);
#endif
}

/* The role a relation of one level of a query is read as: a view's owner, or the current user. */
static inline Oid
docsync_rte_check_as_user(Query *query, RangeTblEntry *rte)
{
#if PG_VERSION_NUM >= 160000
	if (rte->perminfoindex == 0)
		return InvalidOid;
	return getRTEPermissionInfo(query->rteperminfos, rte)->checkAsUser;
#else
	return rte->checkAsUser;
#endif
}

/* Whether a role may EXECUTE a function. */
#if PG_VERSION_NUM >= 160000
#define docsync_may_execute(funcid, roleid) \
	(object_aclcheck(ProcedureRelationId, (funcid), (roleid), ACL_EXECUTE) == ACLCHECK_OK)
#else
#define docsync_may_execute(funcid, roleid) (pg_proc_aclcheck((funcid), (roleid), ACL_EXECUTE) == ACLCHECK_OK)
#endif

/* Whether a role may look names up in a schema (USAGE). */
#if PG_VERSION_NUM >= 160000
#define docsync_may_use_schema(nspid, roleid) \
	(object_aclcheck(NamespaceRelationId, (nspid), (roleid), ACL_USAGE) == ACLCHECK_OK)
#else
#define docsync_may_use_schema(nspid, roleid) (pg_namespace_aclcheck((nspid), (roleid), ACL_USAGE) == ACLCHECK_OK)
#endif

/* Changes between progress reports inside one transaction (before PostgreSQL 16). */
#define DOCSYNC_PROGRESS_EVERY_CHANGES 100

#endif							/* DOCSYNC_COMPAT_H */
