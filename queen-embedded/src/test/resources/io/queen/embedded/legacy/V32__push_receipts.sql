-- Receipts instead of a transaction-id index entry per generated id (issue 11: push at the speed of an INSERT).
--
-- Since V13 every message has a transaction id, and one Queen generated (the text of the message id) got an entry in
-- the unique index messages_transaction_id like a caller's: 37 bytes of text per message, in an index that exists only
-- so that a retry finds what an earlier try stored. Measured on the same server (pgbench, one client, synchronous
-- commit off, 100-row inserts into a copy of messages, interleaved runs): 1,312-1,336 inserts/s with that index,
-- 1,913-1,965 without it, the same with the index in the C collation (1,336-1,378): the entry is a third of the
-- insert, and it is not the collation.
--
-- Now a push's generated ids are made per partition as one run (Broker.timeOrderedUuid): the run's first id, then
-- that id + 1, + 2, ... in its low 17 bits (its rank), so any id of the run names the run's first id (the anchor) and
-- its rank. push_fast and push_partition store the items of a run of two or more without a transaction_id (NULL: no
-- index entry) and write one push_receipts row per run: the anchor, the partition and the run's first offset; the
-- item of rank r is at first_offset + r. A single item keeps its index entry (a receipt row would cost more). A
-- message read back reports its id's text as its transaction id, as before.
--
-- Who looks receipts up: push, with two new arguments per item (p_anchors, p_ords) that the node fills for (1) its
-- own retry after a try of unknown outcome (the generated ids of the call) and (2) a caller's transaction id that has
-- the form of a generated id (the items of a PushOutcomeUnknownException pushed again). The look-up runs after the
-- partition locks, like the transaction-id probe: a try still in flight holds those locks until it commits or rolls
-- back, so the look-up sees its receipt if it committed. An item found is reported 'duplicate' of the stored message
-- (whose id is the item's transaction id), exactly what the index probe reported; an item not found goes on to the
-- index probe (ids stored before this version, or by the full push, which still indexes them).
--
-- The janitor removes receipts older than 24 hours through the primary key (the anchor's first 48 bits are its
-- time): a push of PushOutcomeUnknownException.items() de-duplicates against a receipt for that long (README).
--
-- The payloads now come as text[] and each is cast to jsonb where it is inserted: the cast of the whole array
-- (text[]::jsonb[], which the node used to send) cost 3-4 times the per-row cast (pgbench, 100 payloads of 200 bytes:
-- about 1.9 ms per array against 0.7 ms cast row by row and 0.3 ms not cast at all), a quarter of a batch push's
-- server time.
--
-- The three functions are new signatures (text[] payloads, new trailing arguments); the previous version's keep
-- existing, unchanged, so a node of that version calls them as before while the cluster is upgraded (its
-- generated ids keep their index entries, and its retries look only in the index, for its own pushes). Nothing of
-- this version calls them; a later migration drops them. The new bodies are V31's (push, push_fast) and V28's
-- (push_partition) otherwise, with the same settings.
create table ${schema}.push_receipts (
  anchor       uuid primary key, -- the message id of the run's first item; the others differ in their low 17 bits
  partition_id bigint not null,
  first_offset bigint not null
);

create function ${schema}.push(p_queues text[], p_partitions text[], p_payloads text[], p_txn_ids text[],
                               p_trace_ids text[], p_notify boolean default true, p_ids uuid[] default null,
                               p_types text[] default null, p_versions int[] default null,
                               p_key_ids text[] default null, p_anchors uuid[] default null,
                               p_ords int[] default null)
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
      select array_agg(pp.id order by x.i), bool_and(pp.id is not null) into v_pids, v_all
        from unnest(p_partitions) with ordinality as x(p, i)
        left join (select pp0.id, pp0.name from ${schema}.partitions pp0
                    where pp0.queue_id = v_qid and pp0.name = any(p_partitions)) pp on pp.name = x.p;
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
    -- with its next_offset and last_message_at as they will be after this push (its items: one per item without a
    -- transaction id, one per distinct id), so the update at the end leaves it alone; v_preset lists those rows
    -- (their offsets start at 0 below). The rows come back with their queue and name, so the look-up of the items'
    -- partitions afterwards fills the missing entries from them and probes only for partitions another transaction
    -- created at the same moment (the conflicts skipped here).
    with pairs as (
      select x.qid, x.p, count(*) filter (where x.t is null) + count(distinct x.t) as cnt
        from unnest(v_qids, p_partitions, p_txn_ids, v_pids) as x(qid, p, t, pid)
       where x.pid is null
       group by x.qid, x.p),
    ins as (
      insert into ${schema}.partitions(queue_id, name, next_offset, last_message_at)
      select pairs.qid, pairs.p, case when b.bounded then 0 else pairs.cnt end,
             case when b.bounded then null else now() end
        from pairs
        cross join lateral (select v_bounded and exists (select 1 from ${schema}.queues qq
                                                          where qq.id = pairs.qid and qq.max_size > 0) as bounded) b
      on conflict (queue_id, name) do nothing
      returning id, queue_id, name, next_offset)
    select array_agg(id), array_agg(queue_id), array_agg(name), array_agg(next_offset),
           array_agg(id) filter (where next_offset > 0)
      into v_new, v_new_qids, v_new_names, v_new_next, v_preset from ins;

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
  -- at 0
  select array_agg(l.id), array_agg(l.next_offset)
    into v_lock_ids, v_lock_next
    from (select pp.id, pp.next_offset from ${schema}.partitions pp
           where pp.id = any(v_locked) order by pp.id for no key update) l;
  if v_new is not null then
    v_lock_ids := coalesce(v_lock_ids, '{}') || v_new;
    v_lock_next := coalesce(v_lock_next, '{}') || array_fill(0::bigint, array[cardinality(v_new)]);
  end if;

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

  -- offsets (consecutive per partition, in request order) and ids, in one statement
  select array_agg(case when s.st = 'queued' then s.o else s.prev_off end order by s.i),
         array_agg(case when s.st = 'queued' then coalesce(p_ids[s.i], gen_random_uuid()) else s.prev_id end order by s.i)
    into v_off, v_ids
    from (select x.i, x.st, x.prev_off, x.prev_id,
                 l.next_offset + row_number() over (partition by x.pid, x.st = 'queued' order by x.i) - 1 as o
            from unnest(v_pids, v_status, v_off, v_ids) with ordinality as x(pid, st, prev_off, prev_id, i)
            join unnest(v_lock_ids, v_lock_next) as l(id, next_offset) on l.id = x.pid) s;

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

  insert into ${schema}.messages(partition_id, "offset", id, transaction_id, trace_id, payload, payload_type,
                                 payload_version, key_id)
  select x.pid, x.o, x.id, x.t, x.tr, x.pl::jsonb, x.ty, x.ve, x.kid
    from unnest(v_pids, v_off, v_ids, p_txn_ids, p_trace_ids, p_payloads, v_status, p_types, p_versions, p_key_ids)
         as x(pid, o, id, t, tr, pl, st, ty, ve, kid)
   where x.st = 'queued';

  -- (a partition created here at the count its items took is left alone without reading its row)
  update ${schema}.partitions pp
     set next_offset = s.mx + 1, last_message_at = now()
    from (select x.pid, max(x.o) as mx, max(x.pre) as pre
            from unnest(v_pids, v_off, v_status, v_preset_next) as x(pid, o, st, pre)
           where x.st = 'queued' group by x.pid
          having max(x.pre) is distinct from max(x.o) + 1) s
   where pp.id = s.pid and pp.id = any(v_pids)
     and (s.mx + 1 > pp.next_offset or (s.mx + 1 < pp.next_offset and s.pre is not null));

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

create function ${schema}.push_fast(p_pair_queues text[], p_pair_partitions text[], p_item_pair int[],
                                    p_item_rank int[], p_ids uuid[], p_payloads text[], p_trace_ids text[],
                                    p_txn_ids text[], p_types text[] default null, p_versions int[] default null,
                                    p_key_ids text[] default null, p_pair_anchors uuid[] default null)
returns table(pair int, partition_id bigint, first_offset bigint)
language plpgsql
set enable_seqscan = off
set plan_cache_mode = force_generic_plan
set enable_hashjoin = off
set enable_mergejoin = off
as $$
declare
  v_pids bigint[];
  v_all boolean;
  v_bounded boolean;
  v_plain text;
  v_lock_ids bigint[];
  v_lock_next bigint[];
  v_next bigint[];
  k int;
  m int := cardinality(p_pair_queues);
begin
  select array_agg(pp.id order by x.k), bool_and(pp.id is not null), coalesce(bool_or(q.max_size > 0), false),
         min(case when q.encryption then x.qn end)
    into v_pids, v_all, v_bounded, v_plain
    from unnest(p_pair_queues, p_pair_partitions) with ordinality as x(qn, p, k)
    left join lateral (select qq.id, qq.max_size, qq.encryption from ${schema}.queues qq where qq.name = x.qn offset 0) q on true
    left join lateral (select pp0.id from ${schema}.partitions pp0
                        where pp0.queue_id = q.id and pp0.name = x.p offset 0) pp on true;
  if not v_all or v_bounded then
    return;
  end if;
  if v_plain is not null then
    -- an encrypted queue among the pairs: every item of such a pair must come sealed (a node whose view of the
    -- queue's options is stale finds out here and seals it)
    select min(p_pair_queues[x.pk]) into v_plain
      from unnest(p_item_pair, p_key_ids) as x(pk, kid)
      join ${schema}.queues qq on qq.name = p_pair_queues[x.pk]
     where qq.encryption and x.kid is null;
    if v_plain is not null then
      raise exception 'queue % is encrypted: a payload came without encryption', v_plain
        using errcode = 'QU002', detail = v_plain;
    end if;
  end if;

  -- partition rows in a fixed order: offsets are taken under these locks
  select array_agg(l.id), array_agg(l.next_offset) into v_lock_ids, v_lock_next
    from (select pp.id, pp.next_offset from ${schema}.partitions pp
           where pp.id = any(v_pids) order by pp.id for no key update) l;
  v_next := array_fill(0::bigint, array[m]);
  for k in 1 .. m loop
    v_next[k] := v_lock_next[array_position(v_lock_ids, v_pids[k])];
  end loop;

  -- p_types, p_versions and p_key_ids are null for a batch of untyped, plain payloads (unnest pads them)
  insert into ${schema}.messages(partition_id, "offset", id, transaction_id, trace_id, payload, payload_type,
                                 payload_version, key_id)
  select v_pids[x.pk], v_next[x.pk] + x.rk, x.id, x.t, x.tr, x.pl::jsonb, x.ty, x.ve, x.kid
    from unnest(p_item_pair, p_item_rank, p_ids, p_txn_ids, p_trace_ids, p_payloads, p_types, p_versions, p_key_ids)
         as x(pk, rk, id, t, tr, pl, ty, ve, kid);

  update ${schema}.partitions pp
     set next_offset = s.nxt + s.cnt, last_message_at = now()
    from (select v_pids[c.pk] as pid, v_next[c.pk] as nxt, count(*) as cnt
            from unnest(p_item_pair) as c(pk) group by c.pk) s
   where pp.id = s.pid and pp.id = any(v_pids);

  update ${schema}.cursors c set has_pending = true
   where c.partition_id = any(v_pids) and not c.has_pending;

  -- a receipt for each pair whose items came without a transaction id (their generated ids are not indexed)
  if p_pair_anchors is not null then
    insert into ${schema}.push_receipts(anchor, partition_id, first_offset)
    select x.a, v_pids[x.k], v_next[x.k] from unnest(p_pair_anchors) with ordinality as x(a, k) where x.a is not null;
  end if;

  return query select g.k::int, v_pids[g.k], v_next[g.k] from generate_subscripts(v_pids, 1) as g(k);
end $$;


create function ${schema}.push_partition(p_queue text, p_partition text, p_ids uuid[], p_payloads text[],
                                         p_trace_ids text[], p_txn_ids text[], p_types text[] default null,
                                         p_versions int[] default null, p_key_ids text[] default null,
                                         p_anchors uuid[] default null, p_anchor_starts int[] default null,
                                         out partition_id bigint, out first_offset bigint)
language plpgsql
set enable_seqscan = off
set plan_cache_mode = force_generic_plan
set enable_hashjoin = off
set enable_mergejoin = off
as $$
declare
  n int := coalesce(cardinality(p_ids), 0);
  v_sealed boolean := p_key_ids is not null and array_position(p_key_ids, null) is null;
begin
  if n = 0 or cardinality(p_payloads) <> n or cardinality(p_txn_ids) <> n or cardinality(p_trace_ids) <> n then
    raise exception 'push_partition: argument arrays are empty or differ in length' using errcode = '22023';
  end if;

  update ${schema}.partitions pp set next_offset = pp.next_offset + n, last_message_at = now()
    from ${schema}.queues q
   where q.name = p_queue and pp.queue_id = q.id and pp.name = p_partition and q.max_size = 0
     and (v_sealed or not q.encryption)
  returning pp.id, pp.next_offset - n into partition_id, first_offset;
  if partition_id is null then
    return;
  end if;

  -- p_types, p_versions and p_key_ids are null for untyped, plain payloads (a subscript of null is null; unnest pads)
  if n = 1 then
    insert into ${schema}.messages(partition_id, "offset", id, transaction_id, trace_id, payload, payload_type,
                                   payload_version, key_id)
    values (push_partition.partition_id, push_partition.first_offset, p_ids[1], p_txn_ids[1], p_trace_ids[1],
            p_payloads[1]::jsonb, p_types[1], p_versions[1], p_key_ids[1]);
  else
    insert into ${schema}.messages(partition_id, "offset", id, transaction_id, trace_id, payload, payload_type,
                                   payload_version, key_id)
    select push_partition.partition_id, push_partition.first_offset + x.o - 1, x.id, x.t, x.tr, x.pl::jsonb, x.ty, x.ve, x.kid
      from unnest(p_ids, p_txn_ids, p_trace_ids, p_payloads, p_types, p_versions, p_key_ids)
           with ordinality as x(id, t, tr, pl, ty, ve, kid, o);
  end if;

  update ${schema}.cursors c set has_pending = true
   where c.partition_id = push_partition.partition_id and not c.has_pending;

  -- a receipt for each run of items whose generated ids are not indexed (p_anchor_starts: the run's first position,
  -- from 0)
  if p_anchors is not null then
    insert into ${schema}.push_receipts(anchor, partition_id, first_offset)
    select x.a, push_partition.partition_id, push_partition.first_offset + x.s
      from unnest(p_anchors, p_anchor_starts) as x(a, s);
  end if;
end $$;
