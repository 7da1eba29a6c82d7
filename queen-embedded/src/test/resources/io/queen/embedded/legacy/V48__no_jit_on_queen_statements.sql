-- Queen's functions run short statements on a few rows. On a server with JIT (most packaged and managed ones), a
-- statement whose estimate passes jit_above_cost is compiled on every execution, which costs tens of milliseconds; the
-- enable_* settings some functions keep add 1e10 to the estimate of any sequential scan they leave in (PostgreSQL 15
-- to 17), so a look-up on a ten-row table would be compiled on every pop. Parallel query is refused for the same reason:
-- starting workers costs more than any of these statements. Every function of the schema gets both settings, beside the
-- settings it has (the immutable ones compute and read no table). A test keeps a redefinition from losing them.
do $$
declare
  f regprocedure;
begin
  for f in
    select p.oid::regprocedure
      from pg_catalog.pg_proc p
     where p.pronamespace = '${schema}'::regnamespace
       and p.prokind = 'f'
       and p.provolatile <> 'i'
       and p.prolang in (select l.oid from pg_catalog.pg_language l where l.lanname in ('plpgsql', 'sql'))
  loop
    execute format('alter function %s set jit = off', f);
    execute format('alter function %s set max_parallel_workers_per_gather = 0', f);
  end loop;
end
$$;
