-- Repeated acknowledgements answer one way (issue 8, point 4).
--
-- Before, a second ack of a message answered ACKED while the lease that delivered it was still held
-- (a batch of 3 with one message acked) and LEASE_LOST once the lease had ended (a batch of 1, whose
-- ack released it), and an ack retried after a connection loss that hit after the commit reported
-- LEASE_LOST although it had been applied. The rule now:
--
--   * an item (any status) whose offset is at or below the group's cursor (and is not a redriven dead
--     letter waiting in redeliveries), or that the current lease already completed (acked_ahead), is
--     ALREADY_ACKED and changes nothing, whatever lease it carries;
--   * otherwise the lease check applies: LEASE_LOST means the lease under which the item was delivered
--     is no longer held (expired, taken over, or given up by a failure ack, a release, close or a seek).
--
-- Also: an ack of two leases of the same partition in one call (an old lease's message next to the new
-- lease's whole range) answered nothing for the old lease's items when the new lease went through the
-- one-statement path; the path now matches by lease too.
--
-- "create or replace" drops the function's settings: they are applied again below, as V1, V5 and V6 left
-- them (StartupTest holds every function to its settings).

create or replace function ${schema}.ack(p_pids bigint[], p_groups text[], p_offsets bigint[], p_leases uuid[],
                              p_statuses text[], p_errors text[])
returns table(idx int, outcome text)
language plpgsql as $$
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
     group by x.pid, x.grp, x.lease),
  target as (
    select cu.partition_id, cu.group_name, g.mx, g.lease
      from g
      join ${schema}.cursors cu on cu.partition_id = g.pid and cu.group_name = g.grp
     where g.ok and cu.lease_id = g.lease and cu.lease_expires_at > now() and cu.lease_redrive is null
       and cu.acked_ahead is null and g.mn = cu.committed_offset + 1 and g.mx = cu.lease_to
       and g.nd = g.mx - g.mn + 1
     order by cu.partition_id, cu.group_name
       for update of cu),
  done as (
    update ${schema}.cursors cu
       set committed_offset = t.mx, attempts = 0, last_error = null, retry_at = null, acked_ahead = null,
           lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null
      from target t
     where cu.partition_id = t.partition_id and cu.group_name = t.group_name
    returning cu.partition_id, cu.group_name, cu.committed_offset, t.lease)
  select array_agg(d.partition_id), array_agg(d.group_name), array_agg(d.lease)
    into v_fast_pids, v_fast_groups, v_fast_leases from done d;

  if v_fast_pids is not null then
    for k in select f.pid, f.grp from unnest(v_fast_pids, v_fast_groups) as f(pid, grp)
               join ${schema}.cursors cu on cu.partition_id = f.pid and cu.group_name = f.grp
               join ${schema}.partitions p on p.id = f.pid
              where cu.committed_offset >= p.next_offset - 1 loop
      perform ${schema}.refresh_pending(k.pid, k.grp);
    end loop;
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
    select cu.*, q.retry_limit, q.retry_delay_ms, q.dead_letter, q.id as qid
      into c
      from ${schema}.cursors cu join ${schema}.queues q on q.id = cu.queue_id
     where cu.partition_id = k.pid and cu.group_name = k.grp
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
          if v_st = 'DEAD_LETTER' or v_ra > c.retry_limit then
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
       where cu.partition_id = k.pid and cu.group_name = k.grp;
      perform ${schema}.refresh_pending(k.pid, k.grp);
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
        if v_st = 'DEAD_LETTER' or v_attempts > c.retry_limit then
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
     where cu.partition_id = k.pid and cu.group_name = k.grp;
    if v_released and v_committed >= (select p.next_offset - 1 from ${schema}.partitions p where p.id = k.pid) then
      perform ${schema}.refresh_pending(k.pid, k.grp);
    end if;
  end loop;

  return query select g.i::int, v_out[g.i] from generate_subscripts(v_out, 1) as g(i) order by g.i;
end $$;

alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[]) set enable_seqscan = off;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[])
  set plan_cache_mode = force_generic_plan;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[]) set enable_hashjoin = off;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[]) set enable_mergejoin = off;
