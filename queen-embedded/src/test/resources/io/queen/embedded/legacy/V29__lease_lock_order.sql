-- renew and release lock the cursor rows they change in key order (partition_id, group_name), the order every other
-- statement that locks several cursor rows uses (issue 14: claim latency flat under load).
--
-- V1's renew and release were one UPDATE ... FROM unnest(...): the rows were locked in whatever order the plan met
-- them (the arrays' order through a nested loop, the table's through a hash join). An ack locks its settled cursors
-- ORDER BY partition_id, group_name (V22), so a renewal holding partition 9 and waiting for 3 while an ack held 3
-- and waited for 9 was a deadlock: both backends waited deadlock_timeout (1 s) before PostgreSQL aborted one, and
-- every message of the partitions involved waited with them. Seen in the held-horizon benchmark (800 msgs/s, 2
-- nodes x 8 workers): 15 "deadlock detected" between renew and ack in the server log of a few runs, each a stall of
-- about a second in the claim latency of every worker of both nodes.
--
-- Both now take the row locks first, in key order, then change the rows they hold. The lease conditions are part of
-- the locking query, so a row whose lease changed while we waited for it is re-checked on its newest version and
-- left alone. The arrays may name a lease more than once (one entry per in-flight message): each row is locked and
-- changed once, and renew returns one row per lease it extended, as before.

create or replace function ${schema}.renew(p_pids bigint[], p_groups text[], p_leases uuid[])
returns table(partition_id bigint, group_name text, lease_id uuid)
language sql as $$
  with held as (
    select cu.partition_id, cu.group_name
      from (select distinct x.pid, x.grp, x.lease from unnest(p_pids, p_groups, p_leases) as x(pid, grp, lease)) x
      join ${schema}.cursors cu on cu.partition_id = x.pid and cu.group_name = x.grp
     where cu.lease_id = x.lease and cu.lease_expires_at > now()
     order by cu.partition_id, cu.group_name
       for update of cu)
  update ${schema}.cursors cu
     set lease_expires_at = now() + coalesce(cu.lease_ms, 30000) * interval '1 millisecond'
    from held h
   where cu.partition_id = h.partition_id and cu.group_name = h.group_name
  returning cu.partition_id, cu.group_name, cu.lease_id
$$;

create or replace function ${schema}.release(p_pids bigint[], p_groups text[], p_leases uuid[]) returns int
language plpgsql as $$
declare
  v int;
begin
  with held as (
    select cu.partition_id, cu.group_name
      from (select distinct x.pid, x.grp, x.lease from unnest(p_pids, p_groups, p_leases) as x(pid, grp, lease)) x
      join ${schema}.cursors cu on cu.partition_id = x.pid and cu.group_name = x.grp
     where cu.lease_id = x.lease
     order by cu.partition_id, cu.group_name
       for update of cu)
  update ${schema}.cursors cu
     set lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null,
         lease_redrive = null, acked_ahead = null
    from held h
   where cu.partition_id = h.partition_id and cu.group_name = h.group_name;
  get diagnostics v = row_count;
  return v;
end $$;
