create or replace function ${schema}.items_stamp() returns trigger language plpgsql
set jit = off set max_parallel_workers_per_gather = 0
as $$ begin new.stamped := true; return new; end $$;
