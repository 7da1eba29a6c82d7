create or replace function ${schema}.item_total() returns bigint language sql stable
set jit = off set max_parallel_workers_per_gather = 0
as $$ select coalesce(sum(id), 0) from ${schema}.items $$;
