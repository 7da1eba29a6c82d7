-- Shortens a live lease so that it ends at p_to (which must be inside it). Returns whether it did.

create or replace function ${schema}.shrink_lease(p_pid bigint, p_group text, p_lease uuid, p_to bigint)
returns boolean
language plpgsql
set enable_seqscan = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
begin
  update ${schema}.cursors cu
     set lease_to = p_to
   where cu.partition_id = p_pid and cu.group_name = p_group and cu.lease_id = p_lease
     and cu.lease_expires_at > now() and cu.lease_redrive is null
     and p_to >= cu.lease_from and p_to < cu.lease_to;
  return found;
end $$;
