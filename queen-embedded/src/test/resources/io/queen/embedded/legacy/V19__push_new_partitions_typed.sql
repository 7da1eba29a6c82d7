-- New partitions created at their final next_offset, for the push of V17 (issue 10's source, issue 11).
--
-- V16 made push create a missing partition of an unbounded queue with the next_offset and last_message_at it
-- will have after the push, instead of creating it at 0 and updating it at the end (a second row version and a
-- repeated foreign-key check per new partition: a fifth of a call that creates 1,000 partitions, the source
-- connector's shape; 12 % less WAL). V17 then replaced push to add the typed payload and key id columns, from
-- V13's body, so V16's change was lost on every database migrated past V17. This migration is V17's push with
-- V16's change applied again, nothing else: see V16__push_new_partitions.sql for the rule (v_preset lists the
-- partitions created so; their offsets start at 0 under the same lock; the final update leaves them alone when
-- the count matched and corrects them when it did not; a bounded queue's partitions are created at 0 as before
-- and the size check counts a new partition as empty).
--
-- "create or replace" keeps the argument list of V17 and states the function's setting (enable_seqscan off).

create or replace function ${schema}.push(p_queues text[], p_partitions text[], p_payloads jsonb[], p_txn_ids text[],
                               p_trace_ids text[], p_notify boolean default true, p_ids uuid[] default null,
                               p_types text[] default null, p_versions int[] default null,
                               p_key_ids text[] default null)
returns table(idx int, status text, message_id uuid, partition_id bigint, msg_offset bigint)
language plpgsql
set enable_seqscan = off
as $$
declare
  n int := coalesce(cardinality(p_payloads), 0);
  v_pids bigint[];
  v_qids bigint[];
  v_status text[];
  v_off bigint[];
  v_ids uuid[];
  v_new bigint[];
  v_preset bigint[];
  v_all boolean;
  v_bounded boolean;
  v_plain text;
  v_enc boolean;
  v_has_txn boolean;
  v_lock_ids bigint[];
  v_lock_next bigint[];
  r record;
  v_size bigint;
  v_add bigint;
begin
  if n = 0 then
    raise exception 'push: the batch is empty' using errcode = '22023';
  end if;
  if cardinality(p_queues) <> n or cardinality(p_partitions) <> n or cardinality(p_txn_ids) <> n
     or cardinality(p_trace_ids) <> n then
    raise exception 'push: argument arrays differ in length' using errcode = '22023';
  end if;
  if (p_ids is not null and cardinality(p_ids) <> n) or (p_types is not null and cardinality(p_types) <> n)
     or (p_versions is not null and cardinality(p_versions) <> n) or (p_key_ids is not null and cardinality(p_key_ids) <> n) then
    raise exception 'push: argument arrays differ in length' using errcode = '22023';
  end if;

  -- the fast path: every queue and partition exists already (one statement)
  -- (lateral probes so each item is one lookup on (queue_id, name) whatever the statistics say)
  select array_agg(pp.id order by x.i), array_agg(q.id order by x.i), bool_and(pp.id is not null),
         coalesce(bool_or(q.max_size > 0), false), coalesce(bool_or(q.encryption), false)
    into v_pids, v_qids, v_all, v_bounded, v_enc
    from unnest(p_queues, p_partitions) with ordinality as x(qn, p, i)
    left join lateral (select qq.id, qq.max_size, qq.encryption from ${schema}.queues qq where qq.name = x.qn offset 0) q on true
    left join lateral (select pp0.id from ${schema}.partitions pp0
                        where pp0.queue_id = q.id and pp0.name = x.p offset 0) pp on true;

  if not v_all then
    -- queues and partitions, created on first push
    insert into ${schema}.queues(name)
    select distinct x.qn from unnest(p_queues) as x(qn)
     where not exists (select 1 from ${schema}.queues q where q.name = x.qn)
    on conflict (name) do nothing;

    -- a partition of an unbounded queue is created with its next_offset and last_message_at as they will
    -- be after this push (its items: one per item without a transaction id, one per distinct id), so the
    -- update at the end leaves it alone; v_preset lists those rows (their offsets start at 0 below)
    with pairs as (
      select q.id as qid, q.max_size, x.p, count(*) filter (where x.t is null) + count(distinct x.t) as cnt
        from unnest(p_queues, p_partitions, p_txn_ids) as x(qn, p, t)
        join lateral (select qq.id, qq.max_size from ${schema}.queues qq where qq.name = x.qn offset 0) q on true
       group by q.id, q.max_size, x.p),
    ins as (
      insert into ${schema}.partitions(queue_id, name, next_offset, last_message_at)
      select pairs.qid, pairs.p, case when pairs.max_size > 0 then 0 else pairs.cnt end,
             case when pairs.max_size > 0 then null else now() end
        from pairs
       where not exists (select 1 from ${schema}.partitions pp where pp.queue_id = pairs.qid and pp.name = pairs.p offset 0)
      on conflict (queue_id, name) do nothing
      returning id, next_offset > 0 as preset)
    select array_agg(id), array_agg(id) filter (where preset) into v_new, v_preset from ins;

    if v_new is not null then
      -- a new statement, so groups committed while we waited on the queue row are visible
      insert into ${schema}.cursors(partition_id, group_name, queue_id, committed_offset, has_pending)
      select pp.id, g.name, pp.queue_id, -1, coalesce(pp.id = any(v_preset), false)
        from ${schema}.partitions pp
        join ${schema}.consumer_groups g on g.queue_id = pp.queue_id
       where pp.id = any(v_new)
      on conflict do nothing;
    end if;

    select array_agg(pp.id order by x.i), array_agg(q.id order by x.i), coalesce(bool_or(q.max_size > 0), false),
           coalesce(bool_or(q.encryption), false)
      into v_pids, v_qids, v_bounded, v_enc
      from unnest(p_queues, p_partitions) with ordinality as x(qn, p, i)
      join lateral (select qq.id, qq.max_size, qq.encryption from ${schema}.queues qq where qq.name = x.qn offset 0) q on true
      join lateral (select pp0.id from ${schema}.partitions pp0
                     where pp0.queue_id = q.id and pp0.name = x.p offset 0) pp on true;
  end if;

  -- encrypted queues take sealed payloads only (a node whose view of the options is stale finds out here)
  if v_enc then
    select min(x.qn) into v_plain
      from unnest(v_qids, p_queues, p_key_ids) as x(qid, qn, kid)
     where x.kid is null
       and exists (select 1 from ${schema}.queues qq where qq.id = x.qid and qq.encryption);
    if v_plain is not null then
      raise exception 'queue % is encrypted: a payload came without encryption', v_plain
        using errcode = 'QU002', detail = v_plain;
    end if;
  end if;

  -- bounded queues: one pusher at a time per queue, so the size check is exact
  if v_bounded then
    for r in select q.id from ${schema}.queues q where q.id = any(v_qids) and q.max_size > 0 order by q.id loop
      perform pg_advisory_xact_lock(5860506237810458624 + r.id);
    end loop;
  end if;

  -- partition rows in a fixed order: offsets are taken under these locks
  select array_agg(l.id), array_agg(case when l.id = any(v_preset) then 0 else l.next_offset end)
    into v_lock_ids, v_lock_next
    from (select pp.id, pp.next_offset from ${schema}.partitions pp
           where pp.id = any(v_pids) order by pp.id for no key update) l;

  v_status := array_fill('queued'::text, array[n]);
  v_off := array_fill(null::bigint, array[n]);
  v_ids := array_fill(null::uuid, array[n]);

  -- de-duplication by transaction id: against the stored log (one probe per item through the partial
  -- unique index), then within the batch
  v_has_txn := array_position(p_txn_ids, null) is null or exists (select 1 from unnest(p_txn_ids) as t(v) where t.v is not null);
  if v_has_txn then
    for r in select x.i, m.id, m."offset"
               from unnest(v_pids, p_txn_ids) with ordinality as x(pid, t, i)
               cross join lateral (
                 select mm.id, mm."offset" from ${schema}.messages mm
                  where mm.partition_id = x.pid and mm.transaction_id = x.t and mm.transaction_id is not null) m
              where x.t is not null loop
      v_status[r.i] := 'duplicate';
      v_ids[r.i] := r.id;
      v_off[r.i] := r."offset";
    end loop;
    for r in select s.i from (
               select x.i, x.st, min(x.i) over (partition by x.pid, x.t) as first_i
                 from unnest(v_pids, p_txn_ids, v_status) with ordinality as x(pid, t, st, i)
                where x.t is not null) s
              where s.i <> s.first_i and s.st = 'queued' loop
      v_status[r.i] := 'dup-in-batch';
    end loop;
  end if;

  -- size limits
  if v_bounded then
    for r in select q.id, q.name, q.max_size from ${schema}.queues q
              where q.id = any(v_qids) and q.max_size > 0 order by q.id loop
      select coalesce(sum(case when pp.id = any(v_preset) then 0 else pp.next_offset - pp.first_offset end), 0) into v_size
        from ${schema}.partitions pp where pp.queue_id = r.id;
      select count(*) into v_add from unnest(v_qids, v_status) as x(qid, st) where x.qid = r.id and x.st = 'queued';
      -- (a batch whose items are all duplicates, as on a retry after a lost connection, adds nothing)
      if v_add > 0 and v_size + v_add > r.max_size then
        raise exception 'queue % is full: % stored + % pushed > maxSize %', r.name, v_size, v_add, r.max_size
          using errcode = 'QU001', detail = r.name, hint = r.max_size::text;
      end if;
    end loop;
  end if;

  -- offsets (consecutive per partition, in request order) and ids, in one statement
  select array_agg(case when s.st = 'queued' then s.o else s.prev_off end order by s.i),
         array_agg(case when s.st = 'queued' then coalesce(p_ids[s.i], gen_random_uuid()) else s.prev_id end order by s.i)
    into v_off, v_ids
    from (select x.i, x.st, x.prev_off, x.prev_id,
                 l.next_offset + row_number() over (partition by x.pid, x.st = 'queued' order by x.i) - 1 as o
            from unnest(v_pids, v_status, v_off, v_ids) with ordinality as x(pid, st, prev_off, prev_id, i)
            join unnest(v_lock_ids, v_lock_next) as l(id, next_offset) on l.id = x.pid) s;

  if v_has_txn then
    for r in select s.i, s.first_i from (
               select x.i, x.st, min(x.i) over (partition by x.pid, x.t) as first_i
                 from unnest(v_pids, p_txn_ids, v_status) with ordinality as x(pid, t, st, i)
                where x.t is not null) s
              where s.st = 'dup-in-batch' loop
      v_status[r.i] := 'duplicate';
      v_ids[r.i] := v_ids[r.first_i];
      v_off[r.i] := v_off[r.first_i];
    end loop;
  end if;

  insert into ${schema}.messages(partition_id, "offset", id, transaction_id, trace_id, payload, payload_type,
                                 payload_version, key_id)
  select x.pid, x.o, x.id, x.t, x.tr, x.pl, x.ty, x.ve, x.kid
    from unnest(v_pids, v_off, v_ids, p_txn_ids, p_trace_ids, p_payloads, v_status, p_types, p_versions, p_key_ids)
         as x(pid, o, id, t, tr, pl, st, ty, ve, kid)
   where x.st = 'queued';

  update ${schema}.partitions pp
     set next_offset = s.mx + 1, last_message_at = now()
    from (select x.pid, max(x.o) as mx
            from unnest(v_pids, v_off, v_status) as x(pid, o, st)
           where x.st = 'queued' group by x.pid) s
   where pp.id = s.pid
     and (s.mx + 1 > pp.next_offset or (s.mx + 1 < pp.next_offset and pp.id = any(v_preset)));

  -- setting the flag is always safe; it costs a write only when it was clear
  update ${schema}.cursors c set has_pending = true
   where c.partition_id = any(v_pids) and not c.has_pending;

  if p_notify then
    for r in select distinct x.qn from unnest(p_queues, v_status) as x(qn, st) where x.st = 'queued' loop
      perform pg_notify(${schema_literal} || '.wake', r.qn);
    end loop;
  end if;

  return query select g.i::int, v_status[g.i], v_ids[g.i], v_pids[g.i], v_off[g.i]
                 from generate_subscripts(v_status, 1) as g(i) order by g.i;
end $$;

