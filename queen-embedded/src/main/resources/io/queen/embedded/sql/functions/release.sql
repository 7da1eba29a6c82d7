-- Gives leases back without counting an attempt (a consumer that stops, a batch handed back): the cursor rows of the
-- leases still held, locked in key order; returns how many it released.

create or replace function ${schema}.release(p_pids bigint[], p_groups text[], p_leases uuid[])
returns integer
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  v int;
begin
  with held as (
    select h.partition_id, h.group_name
      from (select distinct x.pid, x.grp, x.lease from unnest(p_pids, p_groups, p_leases) as x(pid, grp, lease)
             order by x.pid, x.grp) x
      cross join lateral (select cu.partition_id, cu.group_name from ${schema}.cursors cu
                           where cu.partition_id = x.pid and cu.group_name = x.grp and cu.lease_id = x.lease
                             for update of cu) h),
  hk as materialized (select jsonb_object_agg(h.partition_id::text || ' ' || h.group_name, true) as m from held h)
  update ${schema}.cursors cu
     set lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null,
         lease_redrive = null, acked_ahead = null
    from hk
   where cu.partition_id = any(p_pids) and hk.m ? (cu.partition_id::text || ' ' || cu.group_name);
  get diagnostics v = row_count;
  return v;
end $$;
