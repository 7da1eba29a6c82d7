-- V46: a busy partition keeps its cursor's has_pending flag, and the consume loop pops the partitions it was told of.
--
-- Until V45 every message delivered alone flipped its cursor's has_pending twice: the push set it, and the ack that
-- caught the cursor up cleared it (under a SHARE lock on the partition). has_pending is in the cursors_ready index, so
-- neither flip could be a HOT update: about two of the four cursor writes per message added a heap version and an entry
-- in each of the cursors' indexes, and with a transaction holding the xmin horizon those entries are what every pop's
-- scan walked. Now a partition is busy while it had a push in the last 100 ms (partitions.last_message_at): more is
-- likely on its way before a cleared flag would matter. A scan passes every busy partition's caught-up cursor (a
-- partition probe each), so the window bounds that cost by the message rate (at most a tenth of a second's pushes):
-- * the consume loop's ack (p_keep_busy) that catches a cursor up clears the flag only when the partition is not busy
--   (and only then locks it), so a busy partition's ack is a HOT update and the next push into it finds the flag set
--   and writes nothing to the cursors; a consumer's own ack clears it as before (its own pops scan every time);
-- * a pop clears a flag it finds with nothing to deliver only when the partition is not busy;
-- * a pop's candidate scan passes over flagged cursors that are caught up and busy, without counting them; a candidate
--   that delivers nothing (a flag it clears) does not count against the partitions the pop may take, within 64 more
--   candidates than that;
-- * pop takes the names of the partitions to look at (p_hints): the consume loop passes those its node's pushes and
--   the other nodes' notifications named, and its own partitions whose units finished while a push came in; it scans
--   (p_hints null) at start, once per poll interval, and when a wake-up named nothing (a transaction's push, a redrive).
-- The flag still never hides work: it is set by every push that finds it clear, cleared only under the partition's
-- SHARE lock when nothing is left (refresh_pending, or the ack's drain), and a redelivery passes the scan's filter. The
-- pop of V45 (eleven arguments, called by nodes of earlier versions during a rolling upgrade) now scans through this one.

create function ${schema}.pop(p_queue text, p_group text, p_batch int, p_max_partitions int, p_partition text,
                              p_lease_ms bigint, p_owner text, p_mode text, p_from timestamptz,
                              p_auto_ack boolean, p_after bigint, p_hints text[])
returns table(partition_name text, partition_id bigint, msg_offset bigint, message_id uuid, transaction_id text,
              trace_id text, payload jsonb, created_at timestamptz, lease_id uuid, attempt int, payload_type text,
              payload_version int, key_id text)
language plpgsql as $$
declare
  q ${schema}.queues;
  c record;
  rd record;
  v_qid bigint;
  v_remaining int := p_batch;
  v_lease_ms bigint;
  v_attempts int;
  v_committed bigint;
  v_hi bigint;
  v_limit int;
  v_lease uuid;
  v_delay_cut bigint;
  v_candidates refcursor;
  v_dead text[];
  v_why text;
  v_counts boolean;
  v_pass int := 1;
  v_fetched int := 0;
  v_spanned boolean;
  v_hint_ids bigint[];
  v_taken int := 0;
begin
  if not p_auto_ack then
    -- a lease lost in a database crash only makes its messages deliverable again sooner, so the pop
    -- need not wait for its WAL flush (an auto-ack pop moves the cursor, which must be durable)
    perform set_config('synchronous_commit', 'off', true);
  end if;
  -- a queue that does not exist is not created by reading it (a typo would make a silent queue)
  select * into q from ${schema}.queues where name = p_queue;
  if not found then
    return;
  end if;
  v_qid := q.id;
  perform ${schema}.ensure_group(v_qid, p_group, p_mode, p_from);
  v_lease_ms := coalesce(p_lease_ms, q.lease_time_ms);
  -- nodes whose heartbeat is older than their session timeout: their leases are free (V11); never the caller's
  -- own (V40: it is popping, so it is alive, however late its heartbeat)
  select array_agg(n.node_id) into v_dead from ${schema}.nodes n
   where n.dead_after <= now() and n.node_id is distinct from p_owner;

  -- The candidates, one query per case so that each keeps one plan (V6__pop_plans.sql): the group's pending
  -- partitions in id order after p_after (where this caller's previous pop stopped), then from the first up to
  -- it, through the cursors_ready index; or the one named.
  <<passes>>
  loop
    if p_partition is not null then
      open v_candidates for
        select cu.partition_id as pid, cu.committed_offset, cu.attempts, cu.lease_id as old_lease, cu.lease_owner,
               cu.lease_redrive, cu.last_error, cu.lease_expires_at, cu.lease_ms, cu.picked_at, p.name as pname, p.next_offset, p.first_offset,
               p.last_message_at as last_push
          from ${schema}.partitions p
          join ${schema}.cursors cu on cu.partition_id = p.id and cu.group_name = p_group
         where p.id = (select pp.id from ${schema}.partitions pp where pp.queue_id = v_qid and pp.name = p_partition)
           and cu.has_pending
           and (cu.lease_expires_at is null or cu.lease_expires_at <= now() or cu.lease_owner = any(v_dead))
           and (cu.retry_at is null or cu.retry_at <= now())
           and (q.window_buffer_ms = 0 or p.last_message_at <= now() - ((q.window_buffer_ms) * interval '1 millisecond'))
         limit p_max_partitions
           for update of cu skip locked;
    elsif p_hints is not null then
      -- (V46) the partitions the caller was told of (pushes, its own finished units): their ids first, a look-up by
      -- name each, then their cursors by key (in one join, a generic plan drove from the group's cursors and repeated
      -- every look-up for each of them)
      select array_agg(pp.id) into v_hint_ids
        from unnest(p_hints) as h(name)
        cross join lateral (select pp0.id from ${schema}.partitions pp0
                             where pp0.queue_id = v_qid and pp0.name = h.name offset 0) pp;
      open v_candidates for
        select cu.partition_id as pid, cu.committed_offset, cu.attempts, cu.lease_id as old_lease, cu.lease_owner,
               cu.lease_redrive, cu.last_error, cu.lease_expires_at, cu.lease_ms, cu.picked_at, p.name as pname, p.next_offset, p.first_offset,
               p.last_message_at as last_push
          from ${schema}.cursors cu
          join lateral (select pp.name, pp.next_offset, pp.first_offset, pp.last_message_at
                          from ${schema}.partitions pp where pp.id = cu.partition_id offset 0) p on true
         where cu.partition_id = any(v_hint_ids) and cu.group_name = p_group and cu.has_pending
           and (cu.lease_expires_at is null or cu.lease_expires_at <= now() or cu.lease_owner = any(v_dead))
           and (cu.retry_at is null or cu.retry_at <= now())
           and (q.window_buffer_ms = 0 or p.last_message_at <= now() - ((q.window_buffer_ms) * interval '1 millisecond'))
           and (p.next_offset - 1 > greatest(cu.committed_offset, p.first_offset - 1) or cu.lease_id is not null
                or coalesce(p.last_message_at, '-infinity') < now() - interval '100 milliseconds'
                or exists (select 1 from ${schema}.redeliveries r
                            where r.partition_id = cu.partition_id and r.group_name = p_group limit 1))
         order by cu.partition_id
         limit p_max_partitions + 64
           for update of cu skip locked;
    elsif v_pass = 1 then
      open v_candidates for
        select cu.partition_id as pid, cu.committed_offset, cu.attempts, cu.lease_id as old_lease, cu.lease_owner,
               cu.lease_redrive, cu.last_error, cu.lease_expires_at, cu.lease_ms, cu.picked_at, p.name as pname, p.next_offset, p.first_offset,
               p.last_message_at as last_push
          from ${schema}.cursors cu
          join lateral (select pp.name, pp.next_offset, pp.first_offset, pp.last_message_at
                          from ${schema}.partitions pp where pp.id = cu.partition_id offset 0) p on true
         where cu.queue_id = v_qid and cu.group_name = p_group and cu.has_pending and cu.partition_id > coalesce(p_after, -1)
           and (cu.lease_expires_at is null or cu.lease_expires_at <= now() or cu.lease_owner = any(v_dead))
           and (cu.retry_at is null or cu.retry_at <= now())
           and (q.window_buffer_ms = 0 or p.last_message_at <= now() - ((q.window_buffer_ms) * interval '1 millisecond'))
           and (p.next_offset - 1 > greatest(cu.committed_offset, p.first_offset - 1) or cu.lease_id is not null
                or coalesce(p.last_message_at, '-infinity') < now() - interval '100 milliseconds'
                or exists (select 1 from ${schema}.redeliveries r
                            where r.partition_id = cu.partition_id and r.group_name = p_group limit 1))
         order by cu.partition_id
         limit p_max_partitions + 64
           for update of cu skip locked;
    else
      -- the second pass wraps around: the partitions up to where the caller's previous pop stopped
      open v_candidates for
        select cu.partition_id as pid, cu.committed_offset, cu.attempts, cu.lease_id as old_lease, cu.lease_owner,
               cu.lease_redrive, cu.last_error, cu.lease_expires_at, cu.lease_ms, cu.picked_at, p.name as pname, p.next_offset, p.first_offset,
               p.last_message_at as last_push
          from ${schema}.cursors cu
          join lateral (select pp.name, pp.next_offset, pp.first_offset, pp.last_message_at
                          from ${schema}.partitions pp where pp.id = cu.partition_id offset 0) p on true
         where cu.queue_id = v_qid and cu.group_name = p_group and cu.has_pending and cu.partition_id <= p_after
           and (cu.lease_expires_at is null or cu.lease_expires_at <= now() or cu.lease_owner = any(v_dead))
           and (cu.retry_at is null or cu.retry_at <= now())
           and (q.window_buffer_ms = 0 or p.last_message_at <= now() - ((q.window_buffer_ms) * interval '1 millisecond'))
           and (p.next_offset - 1 > greatest(cu.committed_offset, p.first_offset - 1) or cu.lease_id is not null
                or coalesce(p.last_message_at, '-infinity') < now() - interval '100 milliseconds'
                or exists (select 1 from ${schema}.redeliveries r
                            where r.partition_id = cu.partition_id and r.group_name = p_group limit 1))
         order by cu.partition_id
         limit p_max_partitions + 64 - v_fetched
           for update of cu skip locked;
    end if;

    loop
      fetch v_candidates into c;
      exit when not found;
      v_fetched := v_fetched + 1;
      v_committed := greatest(c.committed_offset, c.first_offset - 1);
      v_attempts := c.attempts;

      -- a lease that expired, or whose owner stopped heartbeating, is a failed attempt, unless the group
      -- says its consumer counts attempts itself (V14: read only here, so a pop that finds no expired
      -- lease reads nothing more than before)
      if c.old_lease is not null then
        if v_counts is null then
          select g.expiry_counts into v_counts from ${schema}.consumer_groups g
           where g.queue_id = v_qid and g.name = p_group;
          v_counts := coalesce(v_counts, true);
        end if;
      end if;
      -- (V45) a lease taken and last renewed before the server last started, expired since: its holder could not ack
      -- while the database was down, so the expiry says nothing about the message; released without an attempt. The
      -- last contact is the later of the pick and the last renewal (expiry minus lease time); a lease a node's start
      -- freed (its expiry set to now) keeps its pick time, so a crash found after a restart still counts
      v_spanned := c.old_lease is not null and c.lease_expires_at is not null and c.lease_ms is not null
                   and greatest(c.picked_at, c.lease_expires_at - c.lease_ms * interval '1 millisecond')
                       < pg_postmaster_start_time();
      if c.old_lease is not null and (not v_counts or v_spanned) then
        -- released without an attempt: the cursor, the attempts, the error and any redelivery stay as they were
        update ${schema}.cursors cu
           set lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null,
               lease_redrive = null, acked_ahead = null, committed_offset = v_committed
         where cu.partition_id = c.pid and cu.group_name = p_group;
      elsif c.old_lease is not null then
        v_why := case when c.lease_expires_at is not null and c.lease_expires_at > now()
                      then 'lease expired (owner ' || coalesce(c.lease_owner, '?') || ' stopped heartbeating)'
                      else 'lease expired (owner ' || coalesce(c.lease_owner, '?') || ')' end;
        if c.lease_redrive is not null then
          update ${schema}.redeliveries r set attempts = r.attempts + 1
           where r.partition_id = c.pid and r.group_name = p_group and r."offset" = c.lease_redrive
           returning r.attempts into v_attempts;
          if v_attempts is not null and v_attempts > q.retry_limit then
            perform ${schema}.dead_letter(v_qid, q.dead_letter, c.pid, c.lease_redrive, p_group, v_why, v_attempts);
            delete from ${schema}.redeliveries r
             where r.partition_id = c.pid and r.group_name = p_group and r."offset" = c.lease_redrive;
          end if;
          v_attempts := c.attempts;
        else
          v_attempts := v_attempts + 1;
          if v_attempts > q.retry_limit then
            perform ${schema}.dead_letter(v_qid, q.dead_letter, c.pid, v_committed + 1, p_group, v_why, v_attempts);
            v_committed := v_committed + 1;
            v_attempts := 0;
          end if;
        end if;
        update ${schema}.cursors cu
           set lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null,
               lease_redrive = null, acked_ahead = null, committed_offset = v_committed, attempts = v_attempts,
               last_error = case when v_attempts = 0 then null else v_why end
         where cu.partition_id = c.pid and cu.group_name = p_group;
      end if;

      -- a redelivered dead letter goes first, alone
      select r."offset", r.attempts into rd
        from ${schema}.redeliveries r
       where r.partition_id = c.pid and r.group_name = p_group and (r.retry_at is null or r.retry_at <= now())
       order by r."offset" limit 1;
      if found then
        v_lease := case when p_auto_ack then null else gen_random_uuid() end;
        if p_auto_ack then
          delete from ${schema}.redeliveries r
           where r.partition_id = c.pid and r.group_name = p_group and r."offset" = rd."offset";
        end if;
        update ${schema}.cursors cu
           set lease_id = v_lease, lease_owner = p_owner,
               lease_expires_at = case when p_auto_ack then null else now() + ((v_lease_ms) * interval '1 millisecond') end,
               lease_ms = v_lease_ms, lease_from = null, lease_to = null, lease_redrive = case when p_auto_ack then null else rd."offset" end,
               picked_at = clock_timestamp()
         where cu.partition_id = c.pid and cu.group_name = p_group;
        return query
          select c.pname, m.partition_id, m."offset", m.id, m.transaction_id, m.trace_id, m.payload, m.created_at,
                 v_lease, rd.attempts + 1, m.payload_type, m.payload_version, m.key_id
            from ${schema}.messages m where m.partition_id = c.pid and m."offset" = rd."offset";
        v_remaining := v_remaining - 1;
        v_taken := v_taken + 1;
        exit when v_remaining <= 0 or v_taken >= p_max_partitions;
        continue;
      end if;

      v_limit := case when v_attempts > 0 then 1 else v_remaining end;
      v_hi := least(v_committed + v_limit, c.next_offset - 1);
      if q.delayed_processing_ms > 0 and v_hi > v_committed then
        select min(m."offset") - 1 into v_delay_cut
          from ${schema}.messages m
         where m.partition_id = c.pid and m."offset" between v_committed + 1 and v_hi
           and m.created_at > now() - ((q.delayed_processing_ms) * interval '1 millisecond');
        if v_delay_cut is not null then
          v_hi := v_delay_cut;
        end if;
      end if;

      if v_hi <= v_committed then
        -- nothing deliverable now: maybe the flag is stale. (V46) It is cleared only once the partition has had no push
        -- for 100 ms: a partition that is busy keeps its flag, so its pushes and acks do not flip it (each flip is an
        -- update that changes an indexed column, never HOT)
        if v_committed >= c.next_offset - 1 and coalesce(c.last_push, '-infinity') < now() - interval '100 milliseconds' then
          perform ${schema}.refresh_pending(c.pid, p_group);
        end if;
        continue;
      end if;

      if p_auto_ack then
        v_lease := null;
        update ${schema}.cursors cu
           set committed_offset = v_hi, attempts = 0, last_error = null, retry_at = null, acked_ahead = null,
               picked_at = clock_timestamp()
         where cu.partition_id = c.pid and cu.group_name = p_group;
        if v_hi >= c.next_offset - 1 then
          perform ${schema}.refresh_pending(c.pid, p_group);
        end if;
      else
        v_lease := gen_random_uuid();
        update ${schema}.cursors cu
           set lease_id = v_lease, lease_owner = p_owner,
               lease_expires_at = now() + ((v_lease_ms) * interval '1 millisecond'), lease_ms = v_lease_ms,
               lease_from = v_committed + 1, lease_to = v_hi, lease_redrive = null, acked_ahead = null,
               attempts = v_attempts, retry_at = null, picked_at = clock_timestamp()
         where cu.partition_id = c.pid and cu.group_name = p_group;
      end if;

      return query
        select c.pname, m.partition_id, m."offset", m.id, m.transaction_id, m.trace_id, m.payload, m.created_at,
               v_lease, case when m."offset" = v_committed + 1 then v_attempts + 1 else 1 end, m.payload_type,
               m.payload_version, m.key_id
          from ${schema}.messages m
         where m.partition_id = c.pid and m."offset" between v_committed + 1 and v_hi
         order by m."offset";
      v_remaining := v_remaining - (v_hi - v_committed)::int;
      v_taken := v_taken + 1;
      exit when v_remaining <= 0 or v_taken >= p_max_partitions;
    end loop;
    close v_candidates;
    exit passes when p_partition is not null or p_hints is not null or p_after is null or v_pass = 2 or v_remaining <= 0
                     or v_taken >= p_max_partitions or v_fetched >= p_max_partitions + 64;
    v_pass := 2;
  end loop;
end $$;

alter function ${schema}.pop(text, text, int, int, text, bigint, text, text, timestamptz, boolean, bigint, text[])
  set enable_seqscan = off;
alter function ${schema}.pop(text, text, int, int, text, bigint, text, text, timestamptz, boolean, bigint, text[])
  set plan_cache_mode = force_generic_plan;
alter function ${schema}.pop(text, text, int, int, text, bigint, text, text, timestamptz, boolean, bigint, text[])
  set enable_hashjoin = off;
alter function ${schema}.pop(text, text, int, int, text, bigint, text, text, timestamptz, boolean, bigint, text[])
  set enable_mergejoin = off;

create or replace function ${schema}.pop(p_queue text, p_group text, p_batch int, p_max_partitions int, p_partition text,
                              p_lease_ms bigint, p_owner text, p_mode text, p_from timestamptz,
                              p_auto_ack boolean, p_after bigint default null)
returns table(partition_name text, partition_id bigint, msg_offset bigint, message_id uuid, transaction_id text,
              trace_id text, payload jsonb, created_at timestamptz, lease_id uuid, attempt int, payload_type text,
              payload_version int, key_id text)
language sql as $$
  select * from ${schema}.pop(p_queue, p_group, p_batch, p_max_partitions, p_partition, p_lease_ms, p_owner, p_mode,
                               p_from, p_auto_ack, p_after, null::text[])
$$;
alter function ${schema}.pop(text, text, int, int, text, bigint, text, text, timestamptz, boolean, bigint) reset all;

create function ${schema}.ack(p_pids bigint[], p_groups text[], p_offsets bigint[], p_leases uuid[],
                              p_statuses text[], p_errors text[], p_keep_busy boolean)
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
  v_groups int;
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
    select lc.partition_id, lc.group_name, g.mx, g.lease
      from g
      cross join lateral (select cu.partition_id, cu.group_name from ${schema}.cursors cu
                           where cu.partition_id = g.pid and cu.group_name = g.grp
                             and cu.lease_id = g.lease and cu.lease_expires_at > now() and cu.lease_redrive is null
                             and cu.acked_ahead is null and g.mn = cu.committed_offset + 1 and g.mx = cu.lease_to
                             for update of cu) lc
     where g.ok and g.nd = g.mx - g.mn + 1),
  -- the partitions these settlements drain (the cursor reaches the newest message as last read), SHARE-locked with
  -- SKIP LOCKED in id order: one a push holds is skipped and its cursor keeps the flag; a row a push changed after
  -- this statement's snapshot is checked again on its newest version, fails, and its cursor keeps the flag too.
  -- (V46) With p_keep_busy (the consume loop's acks: the loop pops the partitions pushes name, so a flag left set
  -- costs it nothing but its scans' passing, twice a second), a partition pushed to within the last 100 ms is busy:
  -- it is neither locked nor drained, its cursor keeps the flag, and the next push into it writes nothing to the
  -- cursor (a pop clears the flag once it is quiet). A consumer's own acks clear the flag as before: its own pops
  -- scan every time, and would pass every flag left set
  locked as (
    select l.id, l.next_offset
      from (select t.partition_id as pid, max(t.mx) as mx from target t group by t.partition_id order by 1) t
      cross join lateral (select p.id, p.next_offset from ${schema}.partitions p
                           where p.id = t.pid and t.mx >= p.next_offset - 1
                             and (not p_keep_busy
                                  or coalesce(p.last_message_at, '-infinity') < now() - interval '100 milliseconds')
                             for share skip locked) l),
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
     where cu.partition_id = any(p_pids) and tk.m ? (cu.partition_id::text || ' ' || cu.group_name)
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
    select cu.*, q.retry_limit, q.retry_delay_ms, q.dead_letter, q.id as qid,
           coalesce((select g.expiry_counts from ${schema}.consumer_groups g
                      where g.queue_id = cu.queue_id and g.name = cu.group_name), true) as limit_counts
      into c
      from ${schema}.cursors cu
      cross join lateral (select q0.id, q0.retry_limit, q0.retry_delay_ms, q0.dead_letter from ${schema}.queues q0
                           where q0.id = cu.queue_id offset 0) q
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
     where cu.partition_id = k.pid and cu.group_name = k.grp;
    if v_released and v_committed >= (select p.next_offset - 1 from ${schema}.partitions p where p.id = k.pid) then
      perform ${schema}.refresh_pending(k.pid, k.grp);
    end if;
  end loop;

  return query select g.i::int, v_out[g.i] from generate_subscripts(v_out, 1) as g(i) order by g.i;
end $$;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[], boolean) set enable_seqscan = off;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[], boolean)
  set plan_cache_mode = force_generic_plan;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[], boolean) set enable_hashjoin = off;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[], boolean) set enable_mergejoin = off;

-- the ack of six arguments (a consumer's own acks, and nodes of earlier versions) clears flags as V39's did
create or replace function ${schema}.ack(p_pids bigint[], p_groups text[], p_offsets bigint[], p_leases uuid[],
                              p_statuses text[], p_errors text[])
returns table(idx int, outcome text)
language sql as $$
  select * from ${schema}.ack(p_pids, p_groups, p_offsets, p_leases, p_statuses, p_errors, false)
$$;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[]) reset all;
