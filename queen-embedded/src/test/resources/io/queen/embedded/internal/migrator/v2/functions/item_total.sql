-- a new return type: create or replace cannot change it, so the migrator drops the old one first
create or replace function ${schema}.item_total() returns numeric language sql stable
set jit = off set max_parallel_workers_per_gather = 0
as $$ select coalesce(sum(size), 0)::numeric from ${schema}.items $$;
