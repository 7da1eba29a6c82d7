-- Pops for a group: picks partitions with messages after the group's cursor (or a redelivery) and no live lease for
-- the group, takes the lease (one holder per partition and group) and returns up to p_batch messages in offset order,
-- from up to p_max_partitions partitions, with the lease id and each message's attempt. p_partition names one
-- partition; p_hints (the consume loop) names the partitions it was told of, looked up first. A lease that expired,
-- or whose node stopped heartbeating, counts one attempt for its head message (unless the group counts attempts
-- itself), and past retryLimit the head goes to the dead letters. p_auto_ack moves the cursor at once. A queue that
-- does not exist returns nothing and creates nothing. p_keys names the ids of the keys the caller holds (null: no
-- check): in a queue that has had encryption on (queues.sealed) no partition whose next message is sealed under another
-- key is leased, and a range ends before such a message, so a partition waiting for a key holds up no other; a scan
-- that took nothing but passed over such partitions returns one row without a message (message_id null) naming the
-- last of them, where the caller's next scan starts. The eleven-argument form is the same without hints or keys.

create or replace function ${schema}.pop(p_queue text, p_group text, p_batch integer, p_max_partitions integer,
                                         p_partition text, p_lease_ms bigint, p_owner text, p_mode text,
                                         p_from timestamp with time zone, p_auto_ack boolean, p_after bigint,
                                         p_hints text[], p_keys text[] default null::text[])
returns table(partition_name text, partition_id bigint, msg_offset bigint, message_id uuid, transaction_id text,
              trace_id text, payload jsonb, created_at timestamp with time zone, lease_id uuid, attempt integer,
              payload_type text, payload_version integer, key_id text)
language plpgsql
set enable_seqscan = off
set plan_cache_mode = force_generic_plan
set enable_hashjoin = off
set enable_mergejoin = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
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
  v_after bigint;
  v_upto bigint;
  v_spanned boolean;
  v_hint_ids bigint[];
  v_taken int := 0;
  v_tid tid;
  v_redrive boolean;
  v_key text;
  v_sealed_at bigint;
  v_passed_over bigint;
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
  -- nodes whose heartbeat is older than their session timeout: their leases are free; never the caller's
  -- own (it is popping, so it is alive, however late its heartbeat)
  select array_agg(n.node_id) into v_dead from ${schema}.nodes n
   where n.dead_after <= now() and n.node_id is distinct from p_owner;

  -- The candidates, one query per access path so that each keeps one plan: the one partition named; the hinted
  -- partitions through their cursors' ctids; or the group's pending partitions in id order through the
  -- cursors_ready index, in two passes (after p_after, where this caller's previous pop stopped, then from the
  -- first up to it).
  <<passes>>
  loop
    if p_partition is not null then
      open v_candidates for
        select cu.ctid as tid, cu.partition_id as pid, cu.committed_offset, cu.attempts, cu.lease_id as old_lease, cu.lease_owner,
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
      -- the partitions the caller was told of (pushes, its own finished units): their ids first, a look-up by
      -- name each, then their cursors by key (in one join, a generic plan drove from the group's cursors and repeated
      -- every look-up for each of them). Each look-up newest version first; the cursors through the ctids their
      -- look-ups found, in the same statement (one snapshot): a cursor changed since is passed over, as a locked one is
      select array_agg(pp.id order by pp.id) into v_hint_ids
        from unnest(p_hints) as h(name)
        cross join lateral (select pp0.id from ${schema}.partitions pp0
                             where pp0.queue_id >= v_qid and pp0.queue_id <= v_qid
                               and pp0.name >= h.name and pp0.name <= h.name
                             order by pp0.queue_id desc, pp0.name desc limit 1) pp;
      open v_candidates for
        select cu.ctid as tid, cu.partition_id as pid, cu.committed_offset, cu.attempts, cu.lease_id as old_lease, cu.lease_owner,
               cu.lease_redrive, cu.last_error, cu.lease_expires_at, cu.lease_ms, cu.picked_at, p.name as pname, p.next_offset, p.first_offset,
               p.last_message_at as last_push
          from ${schema}.cursors cu
          join lateral (select pp.name, pp.next_offset, pp.first_offset, pp.last_message_at
                          from ${schema}.partitions pp where pp.id >= cu.partition_id and pp.id <= cu.partition_id
                         order by pp.id desc limit 1) p on true
         where cu.ctid = any(array(select t.tid
                                     from unnest(v_hint_ids) as h(id)
                                     cross join lateral (select c0.ctid as tid from ${schema}.cursors c0
                                                          where c0.partition_id >= h.id and c0.partition_id <= h.id
                                                            and c0.group_name >= p_group and c0.group_name <= p_group
                                                          order by c0.partition_id desc, c0.group_name desc limit 1) t))
           and cu.has_pending is true -- not the predicate of cursors_ready: the TID scan stays the plan
           and (cu.lease_expires_at is null or cu.lease_expires_at <= now() or cu.lease_owner = any(v_dead))
           and (cu.retry_at is null or cu.retry_at <= now())
           and (q.window_buffer_ms = 0 or p.last_message_at <= now() - ((q.window_buffer_ms) * interval '1 millisecond'))
           and (p.next_offset - 1 > greatest(cu.committed_offset, p.first_offset - 1) or cu.lease_id is not null
                or coalesce(p.last_message_at, '-infinity') < now() - interval '100 milliseconds'
                or exists (select 1 from ${schema}.redeliveries r
                            where r.partition_id = cu.partition_id and r.group_name = p_group limit 1))
         -- in the order the TID scan reads them: an order by the key would invite reading the cursors in key
         -- order instead of through their ctids
         limit p_max_partitions + 64
           for update of cu skip locked;
    else
      -- the first pass reads the partitions after p_after (where this caller's previous pop stopped), the second
      -- wraps around to the first ones up to it
      v_after := case when v_pass = 1 then coalesce(p_after, -1) else -1 end;
      v_upto := case when v_pass = 1 then 9223372036854775807 else p_after end;
      open v_candidates for
        select cu.ctid as tid, cu.partition_id as pid, cu.committed_offset, cu.attempts, cu.lease_id as old_lease, cu.lease_owner,
               cu.lease_redrive, cu.last_error, cu.lease_expires_at, cu.lease_ms, cu.picked_at, p.name as pname, p.next_offset, p.first_offset,
               p.last_message_at as last_push
          from ${schema}.cursors cu
          join lateral (select pp.name, pp.next_offset, pp.first_offset, pp.last_message_at
                          from ${schema}.partitions pp where pp.id >= cu.partition_id and pp.id <= cu.partition_id
                         order by pp.id desc limit 1) p on true
         where cu.queue_id = v_qid and cu.group_name = p_group and cu.has_pending
           and cu.partition_id > v_after and cu.partition_id <= v_upto
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
      v_tid := c.tid;
      v_committed := greatest(c.committed_offset, c.first_offset - 1);
      v_attempts := c.attempts;

      -- a lease that expired, or whose owner stopped heartbeating, is a failed attempt, unless the group
      -- says its consumer counts attempts itself (read only here, so a pop that finds no expired
      -- lease reads nothing more)
      if c.old_lease is not null then
        if v_counts is null then
          select g.expiry_counts into v_counts from ${schema}.consumer_groups g
           where g.queue_id = v_qid and g.name = p_group;
          v_counts := coalesce(v_counts, true);
        end if;
      end if;
      -- a lease taken and last renewed before the server last started, expired since: its holder could not ack
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
         where cu.ctid = v_tid
        returning cu.ctid into v_tid;
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
         where cu.ctid = v_tid
        returning cu.ctid into v_tid;
      end if;

      -- a redelivered dead letter goes first, alone
      select r."offset", r.attempts into rd
        from ${schema}.redeliveries r
       where r.partition_id = c.pid and r.group_name = p_group and (r.retry_at is null or r.retry_at <= now())
       order by r."offset" limit 1;
      v_redrive := found;
      if v_redrive and q.sealed and p_keys is not null then
        -- a redriven message this caller cannot open is left for a node that can: no lease, no attempt
        select m.key_id into v_key from ${schema}.messages m where m.partition_id = c.pid and m."offset" = rd."offset";
        if v_key is not null and not (v_key = any(p_keys)) then
          v_passed_over := c.pid;
          continue;
        end if;
      end if;
      if v_redrive then
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
         where cu.ctid = v_tid
        returning cu.ctid into v_tid;
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

      if q.sealed and p_keys is not null and v_hi > v_committed then
        -- the range stops before the first message sealed under a key the caller does not hold; a partition whose
        -- head is one is passed over (no lease, no attempt, its flag kept) and waits for a node with the key, while
        -- this pop goes on to the next candidate
        select min(m."offset") into v_sealed_at
          from ${schema}.messages m
         where m.partition_id = c.pid and m."offset" between v_committed + 1 and v_hi
           and m.key_id is not null and not (m.key_id = any(p_keys));
        if v_sealed_at is not null then
          if v_sealed_at = v_committed + 1 then
            v_passed_over := c.pid;
            continue;
          end if;
          v_hi := v_sealed_at - 1;
        end if;
      end if;

      if v_hi <= v_committed then
        -- nothing deliverable now: maybe the flag is stale. It is cleared only once the partition has had no push
        -- for 100 ms: a partition that is busy keeps its flag, so its pushes and acks do not flip it (each flip is an
        -- update that changes an indexed column, never HOT)
        if v_committed >= c.next_offset - 1 and coalesce(c.last_push, '-infinity') < now() - interval '100 milliseconds' then
          perform ${schema}.refresh_pending(c.pid, p_group, v_tid);
        end if;
        continue;
      end if;

      if p_auto_ack then
        v_lease := null;
        update ${schema}.cursors cu
           set committed_offset = v_hi, attempts = 0, last_error = null, retry_at = null, acked_ahead = null,
               picked_at = clock_timestamp()
         where cu.ctid = v_tid
        returning cu.ctid into v_tid;
        if v_hi >= c.next_offset - 1 then
          perform ${schema}.refresh_pending(c.pid, p_group, v_tid);
        end if;
      else
        v_lease := gen_random_uuid();
        update ${schema}.cursors cu
           set lease_id = v_lease, lease_owner = p_owner,
               lease_expires_at = now() + ((v_lease_ms) * interval '1 millisecond'), lease_ms = v_lease_ms,
               lease_from = v_committed + 1, lease_to = v_hi, lease_redrive = null, acked_ahead = null,
               attempts = v_attempts, retry_at = null, picked_at = clock_timestamp()
         where cu.ctid = v_tid
        returning cu.ctid into v_tid;
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
  -- a scan that took nothing, having passed over partitions that wait for a key, says where it stopped in a row
  -- without a message (message_id null): the caller's next scan starts after them instead of at them again, so a run
  -- of such partitions longer than a scan looks at holds up the ones behind it by a pop, not for good
  if v_taken = 0 and v_passed_over is not null and p_partition is null and p_hints is null then
    return query select null::text, v_passed_over, null::bigint, null::uuid, null::text, null::text, null::jsonb,
                        null::timestamptz, null::uuid, null::int, null::text, null::int, null::text;
  end if;
end $$;

create or replace function ${schema}.pop(p_queue text, p_group text, p_batch integer, p_max_partitions integer,
                                         p_partition text, p_lease_ms bigint, p_owner text, p_mode text,
                                         p_from timestamp with time zone, p_auto_ack boolean,
                                         p_after bigint default null::bigint)
returns table(partition_name text, partition_id bigint, msg_offset bigint, message_id uuid, transaction_id text,
              trace_id text, payload jsonb, created_at timestamp with time zone, lease_id uuid, attempt integer,
              payload_type text, payload_version integer, key_id text)
language sql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
  select * from ${schema}.pop(p_queue, p_group, p_batch, p_max_partitions, p_partition, p_lease_ms, p_owner, p_mode,
                               p_from, p_auto_ack, p_after, null::text[])
$$;
