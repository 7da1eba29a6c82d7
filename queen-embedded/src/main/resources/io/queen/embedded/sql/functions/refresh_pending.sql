-- Clears or sets a cursor's has_pending flag from the truth, under a SHARE lock on the partition. When a push holds
-- the partition right now, the flag is left set (that push will commit a message or, if it rolls back, the next pop
-- finds nothing and clears it then): this never waits for a pusher. The caller holds the cursor row (p_tid: the ctid
-- of the version it locked or last wrote), which it finds newest version first.

create or replace function ${schema}.refresh_pending(p_pid bigint, p_group text, p_tid tid)
returns boolean
language plpgsql
set enable_seqscan = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  v_next bigint;
  v_pending boolean;
begin
  select next_offset into v_next from ${schema}.partitions
   where id >= p_pid and id <= p_pid order by id desc limit 1 for share skip locked;
  if not found then
    return true;
  end if;
  select c.committed_offset < v_next - 1
         or exists (select 1 from ${schema}.redeliveries r where r.partition_id = p_pid and r.group_name = p_group)
    into v_pending
    from ${schema}.cursors c where c.ctid = p_tid and c.partition_id = p_pid and c.group_name = p_group;
  if not found then
    -- not the row's version (a caller's bug): the look-up by key, which any version reaches
    return ${schema}.refresh_pending(p_pid, p_group);
  end if;
  update ${schema}.cursors set has_pending = v_pending
   where ctid = p_tid and has_pending is distinct from v_pending;
  return v_pending;
end $$;
