-- push: one transaction for a batch over any queues and partitions, for batches that create queues or partitions,
-- carry transaction ids, or go to bounded queues (push_fast and push_partition take the rest). Per item: 'queued'
-- with its new offset, or 'duplicate' (the same transaction id already in the partition, or earlier in the batch) with
-- the existing message's id and offset. Partition rows are locked in id order and offsets taken under those locks; a
-- bounded queue takes its advisory lock first so its size check is exact ('QU001' when full); an encrypted queue
-- refuses an item without a key id. With p_notify, NOTIFYs once per queue (delivered on commit); Queen's own pushes
-- pass false and notify from a per-node notifier after the commit. With p_anchors, one push_receipts row per
-- partition run, so a retried push finds what it stored.

create or replace function ${schema}.push(p_queues text[], p_partitions text[], p_payloads text[], p_txn_ids text[],
                                          p_trace_ids text[], p_notify boolean default true,
                                          p_ids uuid[] default null::uuid[], p_types text[] default null::text[],
                                          p_versions integer[] default null::integer[],
                                          p_key_ids text[] default null::text[],
                                          p_anchors uuid[] default null::uuid[],
                                          p_ords integer[] default null::integer[])
returns table(idx integer, status text, message_id uuid, partition_id bigint, msg_offset bigint)
language plpgsql
set enable_seqscan = off
set jit = off
set max_parallel_workers_per_gather = 0
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
  v_one boolean;
  v_qid bigint;
  v_new_qids bigint[];
  v_new_names text[];
  v_new_next bigint[];
  v_created boolean[];
  v_preset_next bigint[];
  v_locked bigint[];
  v_pending bigint[];
  v_missing int;
  v_dups int := 0;
  v_upd_ids bigint[];
  v_upd_next bigint[];
  v_upd_preset boolean[];
  v_np_qids bigint[];
  v_np_names text[];
  v_np_next bigint[];
  v_np_at timestamptz[];
begin
  if n = 0 then
    raise exception 'push: the batch is empty' using errcode = '22023';
  end if;
  if cardinality(p_queues) <> n or cardinality(p_partitions) <> n or cardinality(p_txn_ids) <> n
     or cardinality(p_trace_ids) <> n then
    raise exception 'push: argument arrays differ in length' using errcode = '22023';
  end if;
  if (p_ids is not null and cardinality(p_ids) <> n) or (p_types is not null and cardinality(p_types) <> n)
     or (p_versions is not null and cardinality(p_versions) <> n) or (p_key_ids is not null and cardinality(p_key_ids) <> n)
     or (p_anchors is not null and (cardinality(p_anchors) <> n or cardinality(p_ords) <> n)) then
    raise exception 'push: argument arrays differ in length' using errcode = '22023';
  end if;

  -- the fast path: every queue and partition exists already. A batch naming one queue (the source connector's)
  -- looks it up once, then its partitions in one index scan over the names; any other batch in one statement
  -- (lateral probes so each item is one lookup on (queue_id, name) whatever the statistics say)
  v_one := p_queues = array_fill(p_queues[1], array[n]);
  if v_one then
    select qq.id, qq.max_size > 0, qq.encryption into v_qid, v_bounded, v_enc
      from ${schema}.queues qq where qq.name = p_queues[1];
    if v_qid is not null then
      v_qids := array_fill(v_qid, array[n]);
      -- (a probe per item: one index scan over all the names, joined to the items, becomes in the plan PL/pgSQL
      -- caches after five calls (estimating ten items) a nested loop comparing every item with every partition
      -- found: 499,500 comparisons, 56 ms, for 1,000 items into existing partitions)
      select array_agg(pp.id order by x.i), bool_and(pp.id is not null) into v_pids, v_all
        from unnest(p_partitions) with ordinality as x(p, i)
        left join lateral (select pp0.id from ${schema}.partitions pp0
                            where pp0.queue_id = v_qid and pp0.name = x.p offset 0) pp on true;
    else
      v_all := false;
    end if;
  else
    select array_agg(pp.id order by x.i), array_agg(q.id order by x.i), bool_and(pp.id is not null),
           coalesce(bool_or(q.max_size > 0), false), coalesce(bool_or(q.encryption), false)
      into v_pids, v_qids, v_all, v_bounded, v_enc
      from unnest(p_queues, p_partitions) with ordinality as x(qn, p, i)
      left join lateral (select qq.id, qq.max_size, qq.encryption from ${schema}.queues qq where qq.name = x.qn offset 0) q on true
      left join lateral (select pp0.id from ${schema}.partitions pp0
                          where pp0.queue_id = q.id and pp0.name = x.p offset 0) pp on true;
  end if;

  if not v_all then
    -- queues, created on first push (only when one is missing), then looked up again
    if v_qids is null or array_position(v_qids, null) is not null then
      insert into ${schema}.queues(name)
      select distinct x.qn from unnest(p_queues) as x(qn)
       where not exists (select 1 from ${schema}.queues q where q.name = x.qn)
      on conflict (name) do nothing;

      if v_one then
        select qq.id, qq.max_size > 0, qq.encryption into v_qid, v_bounded, v_enc
          from ${schema}.queues qq where qq.name = p_queues[1];
        v_qids := array_fill(v_qid, array[n]);
      else
        select array_agg(q.id order by x.i), coalesce(bool_or(q.max_size > 0), false), coalesce(bool_or(q.encryption), false)
          into v_qids, v_bounded, v_enc
          from unnest(p_queues) with ordinality as x(qn, i)
          left join lateral (select qq.id, qq.max_size, qq.encryption from ${schema}.queues qq where qq.name = x.qn offset 0) q on true;
      end if;
      if array_position(v_qids, null) is not null then
        raise exception 'push: a queue was deleted while this push created it; retry the push' using errcode = '40001';
      end if;
    end if;

    -- the missing partitions (those the look-up above did not find). A partition of an unbounded queue is created
    -- with its next_offset and last_message_at as they will be after this push (one per item: an in-batch
    -- duplicate of a transaction id makes it too high, and the update at the end lowers it), so that otherwise the
    -- update at the end leaves it alone; v_preset lists those rows (their offsets start at 0 below). The rows come
    -- back with their queue and name, so the look-up of the items' partitions afterwards fills the missing entries
    -- from them and probes only for partitions another transaction created at the same moment. The insert goes
    -- without ON CONFLICT first (a speculative insertion costs a third more per row); only when another transaction
    -- committed one of the same partitions meanwhile does it fail, and then it runs again skipping the conflicts.
    select array_agg(np.qid), array_agg(np.p), array_agg(np.next_offset), array_agg(np.last_at)
      into v_np_qids, v_np_names, v_np_next, v_np_at
      from (select pairs.qid, pairs.p, case when b.bounded then 0 else pairs.cnt end as next_offset,
                   case when b.bounded then null else now() end as last_at
              from (select x.qid, x.p, count(*) as cnt
                      from unnest(v_qids, p_partitions, v_pids) as x(qid, p, pid)
                     where x.pid is null
                     group by x.qid, x.p) pairs
              cross join lateral (select v_bounded and exists (select 1 from ${schema}.queues qq
                                                                where qq.id = pairs.qid and qq.max_size > 0) as bounded) b) np;
    begin
      with ins as (
        insert into ${schema}.partitions(queue_id, name, next_offset, last_message_at)
        select * from unnest(v_np_qids, v_np_names, v_np_next, v_np_at)
        returning id, queue_id, name, next_offset)
      select array_agg(id), array_agg(queue_id), array_agg(name), array_agg(next_offset),
             array_agg(id) filter (where next_offset > 0)
        into v_new, v_new_qids, v_new_names, v_new_next, v_preset from ins;
    exception when unique_violation then
      with ins as (
        insert into ${schema}.partitions(queue_id, name, next_offset, last_message_at)
        select * from unnest(v_np_qids, v_np_names, v_np_next, v_np_at)
        on conflict (queue_id, name) do nothing
        returning id, queue_id, name, next_offset)
      select array_agg(id), array_agg(queue_id), array_agg(name), array_agg(next_offset),
             array_agg(id) filter (where next_offset > 0)
        into v_new, v_new_qids, v_new_names, v_new_next, v_preset from ins;
    end;

    -- a new statement, so groups committed while we waited on the queue row are visible
    if v_new is not null and exists (select 1 from ${schema}.consumer_groups g where g.queue_id = any(v_new_qids)) then
      insert into ${schema}.cursors(partition_id, group_name, queue_id, committed_offset, has_pending)
      select x.id, g.name, x.qid, -1, x.nx > 0
        from unnest(v_new, v_new_qids, v_new_next) as x(id, qid, nx)
        join ${schema}.consumer_groups g on g.queue_id = x.qid
      on conflict do nothing;
    end if;

    -- every item's partition: found above, created by this call, or created by another transaction meanwhile;
    -- v_created marks the items of partitions created here, v_preset_next the offset they were created at, v_locked
    -- the partitions to lock below, v_pending those whose cursors may need has_pending set
    select array_agg(coalesce(x.pid, c.id) order by x.i), array_agg(c.id is not null order by x.i),
           array_agg(case when c.nx > 0 then c.nx end order by x.i),
           array_agg(x.pid) filter (where c.id is null),
           array_agg(coalesce(x.pid, c.id)) filter (where c.id is null or c.nx = 0),
           count(*) filter (where x.pid is null and c.id is null)
      into v_pids, v_created, v_preset_next, v_locked, v_pending, v_missing
      from unnest(v_pids, v_qids, p_partitions) with ordinality as x(pid, qid, p, i)
      left join unnest(v_new, v_new_qids, v_new_names, v_new_next) as c(id, qid, name, nx)
             on x.pid is null and c.qid = x.qid and c.name = x.p;
    if v_missing > 0 then
      -- partitions another transaction created at the same moment (the insert skipped them): a probe each
      select array_agg(coalesce(x.pid, pp.id) order by x.i), count(*) filter (where x.pid is null and pp.id is null)
        into v_pids, v_missing
        from unnest(v_pids, v_qids, p_partitions) with ordinality as x(pid, qid, p, i)
        left join lateral (select pp0.id from ${schema}.partitions pp0
                            where x.pid is null and pp0.queue_id = x.qid and pp0.name = x.p offset 0) pp on true;
      if v_missing > 0 then
        raise exception 'push: a partition was deleted while this push created it; retry the push' using errcode = '40001';
      end if;
      select array_agg(x.pid) filter (where x.cr is not true), array_agg(x.pid) filter (where x.pre is null)
        into v_locked, v_pending
        from unnest(v_pids, v_created, v_preset_next) as x(pid, cr, pre);
    end if;
  else
    v_locked := v_pids;
    v_pending := v_pids;
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

  -- partition rows in a fixed order: offsets are taken under these locks. The rows this call created are not
  -- locked again: no other transaction sees them before this one commits (one creating the same partition waits on
  -- the unique index, then finds it committed), and a lock would write a WAL record per row; their offsets start
  -- at 0. v_lock_ids comes back in id order: the offsets below find a partition in it by binary search
  select array_agg(l.id order by l.id), array_agg(l.next_offset order by l.id)
    into v_lock_ids, v_lock_next
    from (select pp.id, pp.next_offset from ${schema}.partitions pp
           where pp.id = any(v_locked) order by pp.id for no key update) l;

  v_status := array_fill('queued'::text, array[n]);
  v_off := array_fill(null::bigint, array[n]);
  v_ids := array_fill(null::uuid, array[n]);

  -- de-duplication by transaction id: against the stored log (one probe per item through the partial
  -- unique index; none for the items of partitions this call created, which hold nothing yet), then within the
  -- batch
  v_has_txn := array_position(p_txn_ids, null) is null or exists (select 1 from unnest(p_txn_ids) as t(v) where t.v is not null);
  if v_has_txn and p_anchors is not null then
    -- items whose transaction id is a Queen-generated message id (p_anchors: the id of the first item of its
    -- partition in the push that made it; p_ords: its rank there): a push through push_fast or push_partition
    -- stored such ids without an index entry and wrote one receipt per partition instead, so the message is at
    -- the receipt's first offset + the rank; it is that message only if its id is the transaction id
    for r in select x.i, m.id, m."offset"
               from unnest(v_pids, p_txn_ids, v_created, p_anchors, p_ords) with ordinality as x(pid, t, cr, a, o, i)
               cross join lateral (
                 select rc.first_offset from ${schema}.push_receipts rc
                  where rc.anchor = x.a and rc.partition_id = x.pid offset 0) rc
               cross join lateral (
                 select mm.id, mm."offset" from ${schema}.messages mm
                  where mm.partition_id = x.pid and mm."offset" = rc.first_offset + x.o offset 0) m
              where x.a is not null and x.cr is not true and m.id::text = x.t loop
      v_status[r.i] := 'duplicate';
      v_ids[r.i] := r.id;
      v_off[r.i] := r."offset";
    end loop;
  end if;
  if v_has_txn then
    for r in select x.i, m.id, m."offset"
               from unnest(v_pids, p_txn_ids, v_created) with ordinality as x(pid, t, cr, i)
               cross join lateral (
                 select mm.id, mm."offset" from ${schema}.messages mm
                  where mm.partition_id = x.pid and mm.transaction_id = x.t and mm.transaction_id is not null
                 offset 0) m
              where x.t is not null and x.cr is not true and v_status[x.i] = 'queued' loop
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
      v_dups := v_dups + 1;
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

  -- offsets (consecutive per partition, in request order) and ids, in one statement: a partition created by this
  -- call starts at 0, a locked one at its next offset, found in the sorted v_lock_ids by width_bucket (a binary
  -- search; the equality check leaves a partition missing from it NULL, which the insert refuses)
  select array_agg(case when s.st = 'queued' then s.o else s.prev_off end order by s.i),
         array_agg(case when s.st = 'queued' then coalesce(p_ids[s.i], gen_random_uuid()) else s.prev_id end order by s.i)
    into v_off, v_ids
    from (select y.i, y.st, y.prev_off, y.prev_id,
                 case when y.cr then 0 when v_lock_ids[y.w] = y.pid then v_lock_next[y.w] end
                   + row_number() over (partition by y.pid, y.st = 'queued' order by y.i) - 1 as o
            from (select x.i, x.pid, x.st, x.prev_off, x.prev_id, coalesce(x.cr, false) as cr,
                         case when x.cr then 0 else width_bucket(x.pid, v_lock_ids) end as w
                    from unnest(v_pids, v_status, v_off, v_ids, v_created)
                         with ordinality as x(pid, st, prev_off, prev_id, cr, i)) y) s;

  if v_dups > 0 then
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

  -- a partition the janitor removed after the look-up above found it (empty and idle) is missing from the locked
  -- rows, so its items got no offset: the push starts again, and its look-up then creates the partition anew
  if array_position(v_off, null) is not null then
    raise exception 'push: a partition was removed while this push looked it up; retry the push' using errcode = '40001';
  end if;

  insert into ${schema}.messages(partition_id, "offset", id, transaction_id, trace_id, payload, payload_type,
                                 payload_version, key_id)
  select x.pid, x.o, x.id, x.t, x.tr, x.pl::jsonb, x.ty, x.ve, x.kid
    from unnest(v_pids, v_off, v_ids, p_txn_ids, p_trace_ids, p_payloads, v_status, p_types, p_versions, p_key_ids)
         as x(pid, o, id, t, tr, pl, st, ty, ve, kid)
   where x.st = 'queued';

  -- (a partition created here at the count its items took is left alone without reading its row; when every item's
  -- partition was created here at that count, nothing is left to update)
  if v_locked is not null or v_dups > 0 or v_bounded then
    -- the new next offsets, one per partition in id order, then one scan of those rows through the key, each
    -- finding its values by binary search in the arrays (array_position would search linearly per row)
    select array_agg(s.pid order by s.pid), array_agg(s.mx + 1 order by s.pid), array_agg(s.pre is not null order by s.pid)
      into v_upd_ids, v_upd_next, v_upd_preset
      from (select x.pid, max(x.o) as mx, max(x.pre) as pre
              from unnest(v_pids, v_off, v_status, v_preset_next) as x(pid, o, st, pre)
             where x.st = 'queued' group by x.pid
            having max(x.pre) is distinct from max(x.o) + 1) s;
    if v_upd_ids is not null then
      -- (every row read has its id in v_upd_ids, whose ids are distinct and sorted: width_bucket is its place)
      update ${schema}.partitions pp
         set next_offset = v_upd_next[width_bucket(pp.id, v_upd_ids)], last_message_at = now()
       where pp.id = any(v_upd_ids)
         and (v_upd_next[width_bucket(pp.id, v_upd_ids)] > pp.next_offset
              or (v_upd_next[width_bucket(pp.id, v_upd_ids)] < pp.next_offset
                  and v_upd_preset[width_bucket(pp.id, v_upd_ids)]));
    end if;
  end if;

  -- setting the flag is always safe; it costs a write only when it was clear (the cursors of partitions created
  -- here at their final offset were created with it set)
  update ${schema}.cursors c set has_pending = true
   where c.partition_id = any(v_pending) and not c.has_pending;

  if p_notify then
    if v_one then
      if array_position(v_status, 'queued') is not null then
        perform pg_notify(${schema_literal} || '.wake', p_queues[1]);
      end if;
    else
      for r in select distinct x.qn from unnest(p_queues, v_status) as x(qn, st) where x.st = 'queued' loop
        perform pg_notify(${schema_literal} || '.wake', r.qn);
      end loop;
    end if;
  end if;

  return query select g.i::int, v_status[g.i], v_ids[g.i], v_pids[g.i], v_off[g.i]
                 from generate_subscripts(v_status, 1) as g(i) order by g.i;
end $$;
