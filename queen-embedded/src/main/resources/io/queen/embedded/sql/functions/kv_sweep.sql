-- Removes up to p_batch expired rows, skipping rows a writer holds; returns how many it removed. Callers run it in
-- small transactions, one node at a time (see KvSweeper).

create or replace function ${schema}.kv_sweep(p_batch integer)
returns integer
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  v int;
begin
  delete from ${schema}.kv k
   where k.ctid in (select e.ctid from ${schema}.kv e
                     where e.expires_at is not null and e.expires_at <= now()
                     limit greatest(p_batch, 1)
                       for update skip locked)
     and k.expires_at <= now();
  get diagnostics v = row_count;
  return v;
end $$;
