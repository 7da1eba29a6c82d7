-- Renews leases still held (extends them by their lease time from now), locking the cursor rows in key order; returns
-- the ones renewed.

create or replace function ${schema}.renew(p_pids bigint[], p_groups text[], p_leases uuid[])
returns table(partition_id bigint, group_name text, lease_id uuid)
language sql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
  with held as (
    select h.partition_id, h.group_name
      from (select distinct x.pid, x.grp, x.lease from unnest(p_pids, p_groups, p_leases) as x(pid, grp, lease)
             order by x.pid, x.grp) x
      cross join lateral (select cu.partition_id, cu.group_name from ${schema}.cursors cu
                           where cu.partition_id = x.pid and cu.group_name = x.grp
                             and cu.lease_id = x.lease and cu.lease_expires_at > now()
                             for update of cu) h),
  hk as materialized (select jsonb_object_agg(h.partition_id::text || ' ' || h.group_name, true) as m from held h)
  update ${schema}.cursors cu
     set lease_expires_at = now() + coalesce(cu.lease_ms, 30000) * interval '1 millisecond'
    from hk
   where cu.partition_id = any(p_pids) and hk.m ? (cu.partition_id::text || ' ' || cu.group_name)
  returning cu.partition_id, cu.group_name, cu.lease_id
$$;
