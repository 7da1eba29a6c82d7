create or replace function ${schema}.bundle_lease_lost()
returns boolean
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
begin
  raise exception 'bundle: a lease was lost' using errcode = 'QB002';
end $$;
