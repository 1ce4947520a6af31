/*-------------------------------------------------------------------------
 *
 * reader.c
 *		The role a worker's compute runs as. docsync.compute_as() is the first statement of every
 *		compute: for the rest of the compute's transaction the current user becomes the reader role
 *		of the definition's definer, which holds only what grant_reader granted for that definer, as
 *		a SECURITY DEFINER function would switch it (a local user id change, under
 *		SECURITY_RESTRICTED_OPERATION), and the search_path the definition's. The pool role is a
 *		member of every reader role, so a doc query could otherwise switch to another definer's
 *		reader role (SET ROLE, set_config('role', …), a function declared with SET role) or back to
 *		the pool role; inside a local user id change PostgreSQL itself refuses all of them. The
 *		transaction's end puts the pool role back (an abort does so itself).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "docsync.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"

PG_FUNCTION_INFO_V1(docsync_compute_as);

/* The compute now running in this transaction: its reader role, and the user to put back. */
static Oid	compute_reader = InvalidOid;
static Oid	compute_saved_user = InvalidOid;
static int	compute_saved_context = 0;

static void reader_xact_callback(XactEvent event, void *arg);
static void refuse_stale_reader(const char *reader);

/* Library load: the callback that ends a compute with its transaction. */
void
docsync_reader_init(void)
{
	RegisterXactCallback(reader_xact_callback, NULL);
}

static void
reader_xact_callback(XactEvent event, void *arg)
{
	if (!OidIsValid(compute_reader))
		return;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
	{
		/* an abort restored the transaction's starting user already; a commit did not */
		SetUserIdAndSecContext(compute_saved_user, compute_saved_context);
		compute_reader = InvalidOid;
	}
}

/*
 * docsync.compute_as(reader name, search_path text) RETURNS void
 *
 * Becomes the reader role (a local user id change under SECURITY_RESTRICTED_OPERATION) and sets
 * search_path (SET LOCAL) for the rest of the transaction. Only inside a transaction block, once per
 * transaction, only to a docsync reader role (docsync_reader_…) whose member the session's user is.
 */
Datum
docsync_compute_as(PG_FUNCTION_ARGS)
{
	char	   *reader;
	Oid			reader_oid;
	Oid			userid;
	int			context;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("docsync.compute_as needs a reader role"),
				 errhint("Pass the reader_role of the definition from docsync.worker_definitions().")));
	if (!IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
				 errmsg("docsync.compute_as can only be used in a transaction block"),
				 errhint("Call it first in the compute's transaction (BEGIN … ROLLBACK).")));
	GetUserIdAndSecContext(&userid, &context);
	if (OidIsValid(compute_reader) || InLocalUserIdChange() || InSecurityRestrictedOperation())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("docsync.compute_as cannot be called inside a compute or a security-definer function"),
				 errdetail("A compute runs as one reader role from its first statement to its end.")));
	reader = NameStr(*PG_GETARG_NAME(0));
	reader_oid = get_role_oid(reader, false);
	if (strncmp(reader, "docsync_reader_", 15) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("role \"%s\" is not a docsync reader role", reader),
				 errdetail("Computes run as the reader roles docsync.grant_reader makes (docsync_reader_…)."),
				 errhint("Pass the reader_role of the definition from docsync.worker_definitions().")));
	if (!is_member_of_role(GetSessionUserId(), reader_oid))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" is not a member of reader role \"%s\"",
						GetUserNameFromId(GetSessionUserId(), false), reader),
				 errhint("Run SELECT docsync.grant_reader('%s'); as the DBA.",
						 GetUserNameFromId(GetSessionUserId(), false))));
	refuse_stale_reader(reader);
	if (!PG_ARGISNULL(1))
		(void) set_config_option("search_path", text_to_cstring(PG_GETARG_TEXT_PP(1)),
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
	compute_saved_user = userid;
	compute_saved_context = context;
	compute_reader = reader_oid;
	SetUserIdAndSecContext(reader_oid, context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	PG_RETURN_VOID();
}

/*
 * Refuses a compute as a reader role that holds a privilege grant_reader gave it which its definer
 * no longer holds (a REVOKE since): docsync.reader_stale_for(), SECURITY DEFINER, called directly,
 * so the pool role needs no right on docsync's tables. A REVOKE from a definer thus stops the
 * definer's computes at once, before grant_reader takes the grant back. Fails closed when the
 * function is missing.
 */
static void
refuse_stale_reader(const char *reader)
{
	Oid			argtypes[1] = {NAMEOID};
	Oid			fn;
	FmgrInfo	flinfo;
	NameData	name;
	Datum		result;

	LOCAL_FCINFO(call, 1);

	fn = LookupFuncName(list_make2(makeString("docsync"), makeString("reader_stale_for")), 1, argtypes, true);
	if (!OidIsValid(fn))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("docsync.reader_stale_for(name) does not exist"),
				 errdetail("A compute is refused when docsync cannot tell whether its reader role holds more than its definer."),
				 errhint("Update the docsync extension: ALTER EXTENSION docsync UPDATE;")));
	namestrcpy(&name, reader);
	fmgr_info(fn, &flinfo);
	InitFunctionCallInfoData(*call, &flinfo, 1, InvalidOid, NULL, NULL);
	call->args[0].value = NameGetDatum(&name);
	call->args[0].isnull = false;
	result = FunctionCallInvoke(call);
	if (!call->isnull)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("docsync compute as \"%s\" refused: %s", reader, TextDatumGetCString(result)),
				 errdetail("A reader role never reads with a privilege its definer no longer holds."),
				 errhint("Run SELECT docsync.grant_reader(<the worker's pool role>); as the DBA.")));
}
