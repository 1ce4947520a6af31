-- The catalog fingerprint of the docsync extension in the current database: every member object
-- with its comment, each function's definition (md5) and grants, relations, columns, constraints,
-- triggers, indexes, event triggers, pg_dump registrations and the schema's grants, OIDs left out.
-- An install of an older version updated by ALTER EXTENSION must print exactly what a fresh install
-- of the default version prints (tests/scenarios/sql_upgrade.sh, packaging/upgrade-diff.sh).
WITH ext AS (SELECT oid, extconfig, extcondition FROM pg_extension WHERE extname = 'docsync'),
members AS (SELECT d.classid, d.objid, d.objsubid FROM pg_depend d, ext
             WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e')
SELECT 'member ' || pg_describe_object(m.classid, m.objid, m.objsubid) || coalesce(' -- ' || ds.description, '')
  FROM members m LEFT JOIN pg_description ds ON ds.classoid = m.classid AND ds.objoid = m.objid AND ds.objsubid = m.objsubid
UNION ALL
SELECT 'function ' || p.oid::regprocedure || ' ' || md5(pg_get_functiondef(p.oid)) || ' ' || coalesce(p.proacl::text, '')
  FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid WHERE p.prokind <> 'a'
UNION ALL
SELECT 'relation ' || c.oid::regclass || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '')
       || coalesce(' ' || md5(pg_get_viewdef(c.oid)), '')
  FROM members m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
UNION ALL
SELECT 'column ' || a.attrelid::regclass || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END || coalesce(' default ' || pg_get_expr(ad.adbin, ad.adrelid), '')
  FROM members m JOIN pg_attribute a ON m.classid = 'pg_class'::regclass AND a.attrelid = m.objid
  LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
 WHERE a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(co.oid)
  FROM members m JOIN pg_constraint co ON m.classid = 'pg_class'::regclass AND co.conrelid = m.objid
UNION ALL
SELECT 'trigger ' || tgrelid::regclass || ' ' || pg_get_triggerdef(t.oid)
  FROM members m JOIN pg_trigger t ON m.classid = 'pg_class'::regclass AND t.tgrelid = m.objid AND NOT t.tgisinternal
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
  FROM members m JOIN pg_index i ON m.classid = 'pg_class'::regclass AND i.indrelid = m.objid
UNION ALL
SELECT 'event trigger ' || e.evtname || ' ' || e.evtevent || ' ' || e.evtfoid::regproc || ' ' || e.evtenabled::text
  FROM members m JOIN pg_event_trigger e ON m.classid = 'pg_event_trigger'::regclass AND e.oid = m.objid
UNION ALL
SELECT 'config dump ' || c::regclass || ' ' || coalesce(w, '')
  FROM ext, unnest(ext.extconfig, ext.extcondition) AS u(c, w)
UNION ALL
SELECT 'schema ' || coalesce(nspacl::text, '') || coalesce(' -- ' || obj_description(oid, 'pg_namespace'), '')
  FROM pg_namespace WHERE nspname = 'docsync'
ORDER BY 1;
