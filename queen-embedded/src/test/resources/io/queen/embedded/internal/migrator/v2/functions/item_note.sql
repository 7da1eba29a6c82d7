-- the two-argument overload is gone; the one left returns its note upper-cased and now reads size too
create or replace function ${schema}.item_note(p_id int) returns text language sql stable
set jit = off set max_parallel_workers_per_gather = 0
as $$ select upper(note) || ' ' || size from ${schema}.items where id = p_id $$;
