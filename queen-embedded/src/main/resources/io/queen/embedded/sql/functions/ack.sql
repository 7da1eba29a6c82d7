-- Acknowledges messages: per item COMPLETED, FAILED or DEAD_LETTER under the lease pop handed out, answered per
-- item with ACKED, ALREADY_ACKED, LEASE_LOST, RETRY_SCHEDULED, REDELIVER or DEAD_LETTERED. Fenced by the lease: an
-- ack whose lease expired or was taken over changes nothing. Completing the whole leased range moves the cursor and
-- releases the lease (the common case, one statement for every such lease); a prefix moves the cursor over the
-- prefix; a failed head counts an attempt and waits retryDelay, and past retryLimit goes to the dead letters. A group
-- whose consumer counts its own attempts (consumer_groups.expiry_counts false) dead-letters only on DEAD_LETTER.
-- Cursor rows are locked in key order. With p_keep_busy (the consume loop's acks) a busy partition keeps its
-- has_pending flag (see the comment in the body). The six-argument form is the same without p_keep_busy.

create or replace function ${schema}.ack(p_pids bigint[], p_groups text[], p_offsets bigint[], p_leases uuid[],
                                         p_statuses text[], p_errors text[], p_keep_busy boolean)
returns table(idx integer, outcome text)
language plpgsql
set enable_seqscan = off
set plan_cache_mode = force_generic_plan
set enable_hashjoin = off
set enable_mergejoin = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  n int := coalesce(cardinality(p_pids), 0);
  v_out text[];
  k record;
  c record;
  j int;
  v_o bigint;
  v_st text;
  v_err text;
  v_committed bigint;
  v_ahead bigint[];
  v_attempts int;
  v_error text;
  v_retry_at timestamptz;
  v_released boolean;
  v_head_changed boolean;
  v_ra int;
  v_fast_pids bigint[];
  v_fast_groups text[];
  v_fast_leases uuid[];
  v_live boolean;
  v_found boolean;
  v_groups int;
  v_tid tid;
begin
  if n = 0 then
    return;
  end if;
  if cardinality(p_groups) <> n or cardinality(p_offsets) <> n or cardinality(p_leases) <> n
     or cardinality(p_statuses) <> n or cardinality(p_errors) <> n then
    raise exception 'ack: argument arrays differ in length' using errcode = '22023';
  end if;
  v_out := array_fill(null::text, array[n]);

  -- The common case in one statement: every item of a lease COMPLETED, covering exactly the leased
  -- range, under a live lease. The cursor moves to the end of the range and the lease is released.
  with g as (
    select x.pid, x.grp, x.lease, min(x.o) as mn, max(x.o) as mx, count(distinct x.o) as nd,
           bool_and(x.st = 'COMPLETED') as ok
      from unnest(p_pids, p_groups, p_leases, p_offsets, p_statuses) as x(pid, grp, lease, o, st)
     group by x.pid, x.grp, x.lease
     order by x.pid, x.grp),
  -- each lease's cursor locked by a look-up driven by the items, in key order (a lateral subquery with its own lock
  -- runs once per item, whatever the statistics); its conditions are checked again on the newest version of the row
  target as (
    select lc.tid, lc.partition_id, lc.group_name, g.mx, g.lease
      from g
      cross join lateral (select cu.ctid as tid, cu.partition_id, cu.group_name, cu.lease_id, cu.lease_expires_at,
                                 cu.lease_redrive, cu.acked_ahead, cu.committed_offset, cu.lease_to
                            from ${schema}.cursors cu
                           where cu.partition_id >= g.pid and cu.partition_id <= g.pid
                             and cu.group_name >= g.grp and cu.group_name <= g.grp
                           order by cu.partition_id desc, cu.group_name desc limit 1
                             for update of cu) lc
     where g.ok and g.nd = g.mx - g.mn + 1
       and lc.lease_id = g.lease and lc.lease_expires_at > now() and lc.lease_redrive is null
       and lc.acked_ahead is null and g.mn = lc.committed_offset + 1 and g.mx = lc.lease_to),
  -- the partitions these settlements drain (the cursor reaches the newest message as last read), SHARE-locked with
  -- SKIP LOCKED in id order: one a push holds is skipped and its cursor keeps the flag; a row a push changed after
  -- this statement's snapshot is checked again on its newest version, fails, and its cursor keeps the flag too.
  -- With p_keep_busy (the consume loop's acks: the loop pops the partitions pushes name, so a flag left set
  -- costs it nothing but its scans' passing, twice a second), a partition pushed to within the last 100 ms is busy:
  -- it is neither locked nor drained, its cursor keeps the flag, and the next push into it writes nothing to the
  -- cursor (a pop clears the flag once it is quiet). Only a partition whose last push came a second or more
  -- after the push that created it is busy: a younger one is drained, as it is by a consumer's own acks. A consumer's
  -- own acks clear the flag as before: its own pops scan every time, and would pass every flag left set
  locked as (
    select l.id, l.next_offset
      from (select t.partition_id as pid, max(t.mx) as mx from target t group by t.partition_id order by 1) t
      cross join lateral (select p0.next_offset, p0.last_message_at, p0.created_at from ${schema}.partitions p0
                           where p0.id >= t.pid and p0.id <= t.pid order by p0.id desc limit 1) p0
      cross join lateral (select p.id, p.next_offset from ${schema}.partitions p
                           where p.id >= t.pid and p.id <= t.pid and t.mx >= p.next_offset - 1
                             and (not p_keep_busy
                                  or coalesce(p.last_message_at, '-infinity') < now() - interval '100 milliseconds'
                                  or p.last_message_at < p.created_at + interval '1 second')
                           order by p.id desc limit 1
                             for share skip locked) l
     where t.mx >= p0.next_offset - 1
       and (not p_keep_busy or coalesce(p0.last_message_at, '-infinity') < now() - interval '100 milliseconds'
            or p0.last_message_at < p0.created_at + interval '1 second')),
  -- the settled cursors and the locked partitions as jsonb objects (one row each, materialized): each updated row
  -- finds its own in them by key, "partition_id group_name" and "partition_id"
  tk as materialized (select jsonb_object_agg(t.partition_id::text || ' ' || t.group_name,
                                               jsonb_build_array(t.mx, t.lease)) as m from target t),
  lk as materialized (select jsonb_object_agg(l.id::text, l.next_offset) as m from locked l),
  done as (
    update ${schema}.cursors cu
       set committed_offset = (tk.m -> (cu.partition_id::text || ' ' || cu.group_name) ->> 0)::bigint,
           attempts = 0, last_error = null, retry_at = null, acked_ahead = null,
           lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null,
           has_pending = case when (tk.m -> (cu.partition_id::text || ' ' || cu.group_name) ->> 0)::bigint
                                   >= (lk.m ->> cu.partition_id::text)::bigint - 1
                               and not exists (select 1 from ${schema}.redeliveries r
                                                where r.partition_id = cu.partition_id and r.group_name = cu.group_name)
                              then false else cu.has_pending end
      from tk cross join lk
     where cu.ctid = any(array(select t.tid from target t)) and tk.m ? (cu.partition_id::text || ' ' || cu.group_name)
    returning cu.partition_id, cu.group_name,
              (tk.m -> (cu.partition_id::text || ' ' || cu.group_name) ->> 1)::uuid as lease)
  select array_agg(d.partition_id), array_agg(d.group_name), array_agg(d.lease), (select count(*) from g)
    into v_fast_pids, v_fast_groups, v_fast_leases, v_groups from done d;

  if v_fast_pids is not null then
    -- the redelivery check above saw the statement's snapshot, taken before it waited for any cursor row: a dead
    -- letter redriven into one of these partitions by a transaction that held the row and committed while we waited
    -- is seen here, with a fresh snapshot, and the flag set again (a write only in that case)
    if exists (select 1 from unnest(v_fast_pids, v_fast_groups) as f(pid, grp)
                cross join lateral (select 1 from ${schema}.redeliveries r
                                     where r.partition_id = f.pid and r.group_name = f.grp limit 1) r) then
      update ${schema}.cursors cu set has_pending = true
        from unnest(v_fast_pids, v_fast_groups) as f(pid, grp)
       where cu.partition_id = any(v_fast_pids) and cu.partition_id = f.pid and cu.group_name = f.grp
         and not cu.has_pending
         and exists (select 1 from ${schema}.redeliveries r where r.partition_id = f.pid and r.group_name = f.grp);
    end if;
    if cardinality(v_fast_pids) = v_groups then
      -- every item belonged to a lease the common case settled (a batch consumer's ack): all ACKED, in one go
      return query select g.i::int, 'ACKED'::text from generate_series(1, n) as g(i);
      return;
    end if;
    for k in select x.i from unnest(p_pids, p_groups, p_leases) with ordinality as x(pid, grp, lease, i)
               join unnest(v_fast_pids, v_fast_groups, v_fast_leases) as f(pid, grp, lease)
                 on f.pid = x.pid and f.grp = x.grp and f.lease = x.lease loop
      v_out[k.i] := 'ACKED';
    end loop;
  end if;

  -- Everything else, one (partition, group, lease) at a time, items in offset order.
  for k in select x.pid, x.grp, x.lease,
                  array_agg(x.i order by x.o, x.i) as idxs, array_agg(x.o order by x.o, x.i) as offs,
                  array_agg(x.st order by x.o, x.i) as sts, array_agg(x.err order by x.o, x.i) as errs
             from unnest(p_pids, p_groups, p_leases, p_offsets, p_statuses, p_errors)
                  with ordinality as x(pid, grp, lease, o, st, err, i)
            where v_fast_pids is null
               or not exists (select 1 from unnest(v_fast_pids, v_fast_groups, v_fast_leases) as f(pid, grp, lease)
                               where f.pid = x.pid and f.grp = x.grp and f.lease = x.lease)
            group by x.pid, x.grp, x.lease
            order by x.pid, x.grp loop
    select cu.ctid as tid, cu.*, q.retry_limit, q.retry_delay_ms, q.dead_letter, q.id as qid,
           coalesce((select g.expiry_counts from ${schema}.consumer_groups g
                      where g.queue_id = cu.queue_id and g.name = cu.group_name), true) as limit_counts
      into c
      from ${schema}.cursors cu
      cross join lateral (select q0.id, q0.retry_limit, q0.retry_delay_ms, q0.dead_letter from ${schema}.queues q0
                           where q0.id = cu.queue_id offset 0) q
     where cu.partition_id >= k.pid and cu.partition_id <= k.pid and cu.group_name >= k.grp and cu.group_name <= k.grp
     order by cu.partition_id desc, cu.group_name desc limit 1
       for update of cu;
    v_found := found;
    v_live := v_found and c.lease_id is not null and c.lease_id = k.lease and c.lease_expires_at > now();
    if not v_live then
      -- Not under the current lease: nothing changes. An item the group is already past (at or below
      -- the cursor, and not waiting in redeliveries) was acknowledged before, by this consumer or the
      -- one that took over: ALREADY_ACKED. Anything else: LEASE_LOST.
      for j in 1 .. cardinality(k.idxs) loop
        if v_found and k.offs[j] <= c.committed_offset
           and not exists (select 1 from ${schema}.redeliveries r
                            where r.partition_id = k.pid and r.group_name = k.grp and r."offset" = k.offs[j]) then
          v_out[k.idxs[j]] := 'ALREADY_ACKED';
        else
          v_out[k.idxs[j]] := 'LEASE_LOST';
        end if;
      end loop;
      continue;
    end if;

    -- a redelivered dead letter
    if c.lease_redrive is not null then
      for j in 1 .. cardinality(k.idxs) loop
        v_o := k.offs[j];
        v_st := k.sts[j];
        if j > 1 and k.offs[j - 1] = v_o then
          -- the same message twice in one call: the first answer decides
          v_out[k.idxs[j]] := case when v_out[k.idxs[j - 1]] in ('ACKED', 'DEAD_LETTERED', 'ALREADY_ACKED')
                                   then 'ALREADY_ACKED' else 'LEASE_LOST' end;
          continue;
        end if;
        if v_o <> c.lease_redrive then
          v_out[k.idxs[j]] := case when v_o <= c.committed_offset then 'ALREADY_ACKED' else 'LEASE_LOST' end;
          continue;
        end if;
        if v_st = 'COMPLETED' then
          delete from ${schema}.redeliveries r
           where r.partition_id = k.pid and r.group_name = k.grp and r."offset" = v_o;
          v_out[k.idxs[j]] := 'ACKED';
        else
          update ${schema}.redeliveries r set attempts = r.attempts + 1,
                 retry_at = now() + ((c.retry_delay_ms) * interval '1 millisecond')
           where r.partition_id = k.pid and r.group_name = k.grp and r."offset" = v_o
           returning r.attempts into v_ra;
          if v_st = 'DEAD_LETTER' or (c.limit_counts and v_ra > c.retry_limit) then
            perform ${schema}.dead_letter(c.qid, c.dead_letter, k.pid, v_o, k.grp, k.errs[j], v_ra);
            delete from ${schema}.redeliveries r
             where r.partition_id = k.pid and r.group_name = k.grp and r."offset" = v_o;
            v_out[k.idxs[j]] := 'DEAD_LETTERED';
          else
            v_out[k.idxs[j]] := 'RETRY_SCHEDULED';
          end if;
        end if;
      end loop;
      update ${schema}.cursors cu
         set lease_id = null, lease_owner = null, lease_expires_at = null, lease_redrive = null
       where cu.ctid = c.tid
      returning cu.ctid into v_tid;
      perform ${schema}.refresh_pending(k.pid, k.grp, v_tid);
      continue;
    end if;

    v_committed := c.committed_offset;
    v_ahead := coalesce(c.acked_ahead, '{}'::bigint[]);
    v_attempts := c.attempts;
    v_error := c.last_error;
    v_retry_at := null;
    v_released := false;
    v_head_changed := false;

    for j in 1 .. cardinality(k.idxs) loop
      v_o := k.offs[j];
      v_st := k.sts[j];
      v_err := k.errs[j];
      if v_o <= c.committed_offset or v_o = any(coalesce(c.acked_ahead, '{}'::bigint[])) then
        v_out[k.idxs[j]] := 'ALREADY_ACKED'; -- before this call
      elsif v_released then
        v_out[k.idxs[j]] := 'REDELIVER';
      elsif v_o <= v_committed or v_o = any(v_ahead) then
        v_out[k.idxs[j]] := 'ALREADY_ACKED'; -- earlier in this call
      elsif v_o < c.lease_from or v_o > c.lease_to then
        v_out[k.idxs[j]] := 'LEASE_LOST';
      elsif v_st = 'COMPLETED' then
        if v_o = v_committed + 1 then
          v_committed := v_o;
          v_head_changed := true;
          while v_committed + 1 = any(v_ahead) loop
            v_committed := v_committed + 1;
          end loop;
        else
          v_ahead := v_ahead || v_o;
        end if;
        v_out[k.idxs[j]] := 'ACKED';
      elsif v_o = v_committed + 1 then
        -- the head failed
        if v_head_changed then
          v_attempts := 0;
          v_head_changed := false;
        end if;
        v_attempts := v_attempts + 1;
        if v_st = 'DEAD_LETTER' or (c.limit_counts and v_attempts > c.retry_limit) then
          perform ${schema}.dead_letter(c.qid, c.dead_letter, k.pid, v_o, k.grp, v_err, v_attempts);
          v_committed := v_o;
          v_head_changed := true;
          while v_committed + 1 = any(v_ahead) loop
            v_committed := v_committed + 1;
          end loop;
          v_out[k.idxs[j]] := 'DEAD_LETTERED';
        else
          v_error := v_err;
          v_retry_at := now() + ((c.retry_delay_ms) * interval '1 millisecond');
          v_released := true;
          v_out[k.idxs[j]] := 'RETRY_SCHEDULED';
        end if;
      else
        -- a failure behind unacknowledged messages: the lease is released and the whole rest is
        -- redelivered; the failure is not counted against a message that is not the head
        v_released := true;
        v_out[k.idxs[j]] := 'RETRY_SCHEDULED';
      end if;
    end loop;

    if v_head_changed then
      v_attempts := 0;
      v_error := null;
    end if;
    if v_committed >= c.lease_to then
      v_released := true;
    end if;
    update ${schema}.cursors cu
       set committed_offset = v_committed,
           acked_ahead = case when v_released then null
                              else (select array_agg(a) from unnest(v_ahead) a where a > v_committed) end,
           attempts = v_attempts, last_error = v_error, retry_at = v_retry_at,
           lease_id = case when v_released then null else cu.lease_id end,
           lease_owner = case when v_released then null else cu.lease_owner end,
           lease_expires_at = case when v_released then null else cu.lease_expires_at end,
           lease_from = case when v_released then null else cu.lease_from end,
           lease_to = case when v_released then null else cu.lease_to end
     where cu.ctid = c.tid
    returning cu.ctid into v_tid;
    if v_released and v_committed >= (select p.next_offset - 1 from ${schema}.partitions p
                                       where p.id >= k.pid and p.id <= k.pid order by p.id desc limit 1) then
      perform ${schema}.refresh_pending(k.pid, k.grp, v_tid);
    end if;
  end loop;

  return query select g.i::int, v_out[g.i] from generate_subscripts(v_out, 1) as g(i) order by g.i;
end $$;

create or replace function ${schema}.ack(p_pids bigint[], p_groups text[], p_offsets bigint[], p_leases uuid[],
                                         p_statuses text[], p_errors text[])
returns table(idx integer, outcome text)
language sql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
  select * from ${schema}.ack(p_pids, p_groups, p_offsets, p_leases, p_statuses, p_errors, false)
$$;
