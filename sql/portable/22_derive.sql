-- sql/portable/22_derive.sql: derived watches need the extension's C analysis of a doc query (the
-- parse and rewrite of plugin/derive*.c), which plpgsql cannot do; in the portable install a query
-- is defined with watches => 'manual' (the default here) and its watches are written by hand.

-- portable: function docsync.derive_watches/3
CREATE FUNCTION docsync.derive_watches(sql text, search_path text, definer regrole)
RETURNS TABLE (table_schema name, table_name name, kind text, columns name[], keys_sql text,
               keys_args name[], read_columns name[], why text)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RAISE EXCEPTION 'derived watches are not available in the portable install of docsync'
    USING ERRCODE = 'feature_not_supported',
          DETAIL = 'Deriving the watches of a doc query needs the extension''s C analysis of the query, which a server without the docsync library cannot run.',
          HINT = 'Define the query with watches => ''manual'' (the default here) and write its watches by hand with docsync.watch().';
END
$$;
COMMENT ON FUNCTION docsync.derive_watches(text, text, regrole) IS
  'in the portable install: raises feature_not_supported (derived watches need the extension''s C analysis; write watches by hand)';
