create or replace function ${schema}.item_note(p_id int) returns text language sql stable
set jit = off set max_parallel_workers_per_gather = 0
as $$ select note from ${schema}.items where id = p_id $$;

create or replace function ${schema}.item_note(p_id int, p_default text) returns text language sql stable
set jit = off set max_parallel_workers_per_gather = 0
as $$ select coalesce(${schema}.item_note(p_id), p_default) $$;
