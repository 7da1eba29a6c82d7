create or replace function ${schema}.item_count() returns bigint language sql stable
set jit = off set max_parallel_workers_per_gather = 0
as $$ select count(*) from ${schema}.items $$;
