-- push and ack keep their plans' shape whatever the statistics say (issue 10: a source drain that slowed down
-- as it went; issue 14: an ack that read every partition once per partition).
--
-- A vacuum that finds a table empty of live rows (a queue deleted, a job queue's log drained by retention) records
-- zero rows and keeps the table's pages; until the next analyze the planner takes the table and its indexes for
-- empty, one row each, however much has been written since. The functions run with sequential scans off and (ack)
-- hash and merge joins off, which stops scans and join methods, not the order of a nested loop: with "one row" on
-- both sides a plan may read a whole index as the outer side and join the call's items to it by a filter, once per
-- entry. Measured (StaleStatisticsTest: 2,000 partitions and 20,000 messages written after such a vacuum):
--
-- - push's transaction-id probe, a lateral subquery the planner flattened and turned around: the whole
--   messages_transaction_id index read and the items unnested again per entry. In a full benchmark run
--   (auto_explain) every source bundle took 20 ms longer than the one before, 2.5 s at the end instead of 60 ms
--   (source_vs_raw 0.020 instead of 0.15). `offset 0` keeps the subquery from being flattened: a lateral subquery
--   runs once per item, so the items are the outer side, one index look-up each;
-- - push's closing update of next_offset: every partition of the table read, and the items' aggregate scanned once
--   per partition (1.5 million comparisons, 250 ms, for a push of 1,000 items over 2,000 partitions);
-- - push_fast's closing update of next_offset, the same shape: every partition read per call (2,000 per push of
--   50 items);
-- - ack's common case: the partitions it drains looked up by a semi-join that read every partition and, per
--   partition, every partition again (4 million comparisons, 2 s per ack, with 2,000 partitions: quadratic in
--   the table);
-- - every single-row look-up of a cursor by its key (partition_id, group_name) in pop and ack: the planner took
--   cursors_group (queue_id, group_name) with group_name as its only condition, a scan of every cursor of the group
--   (2,000 entries per look-up), over the primary key; under "one row" statistics the two cost the same.
--
-- - pop's look-up of a named partition: the partition read through its primary key in id order (every partition,
--   filtered by queue and name) and its cursor through the primary key with the group as the only condition; the
--   partition's id is now an uncorrelated subquery on (queue_id, name), so both scans are look-ups by key;
-- - renew and release, the same shape as ack's: the group's cursors read in key order as the outer side, twice;
-- - ack's look-up of one cursor with its queue (every case but the common one): every cursor read through an index
--   on queue_id, whose order suited the join, and filtered by key; the queue is now a lateral look-up of the cursor.
--
-- cursors_group is replaced by an index on queue_id alone: no look-up by key can use it, and what used it (deleting
-- a group's cursors, the status's count of leased cursors per group) reads the queue's cursors and filters by group.
--
-- Every scan of a table in those statements now also carries the call's own keys as a restriction on the index's
-- leading column (`= any(...)` over the arguments): a restriction on an index key is an index condition in every
-- plan the planner can choose, so the scan reads at most the call's rows, whatever the statistics say. The worst
-- left is a join of the call's rows with the call's items by a filter (quadratic in the batch, not in the table:
-- about 100 ms for 1,000 partitions in one push while the statistics are wrong; 5 ms with them right, the plan
-- unchanged). Locking (rows, order, SKIP LOCKED) and every result are unchanged.
--
-- "create or replace" keeps the argument lists and replaces each function's settings with those its statement
-- states: push's one and push_fast's four are in their statements, ack's and pop's four are stated again below
-- (renew and release have none). The bodies are V23's (push), V17's (push_fast), V30's (ack), V27's (pop) and V29's
-- (renew, release) otherwise.

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
     or (p_versions is not null and cardinality(p_versions) <> n) or (p_key_ids is not null and cardinality(p_key_ids) <> n) then
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
  if v_has_txn then
    for r in select x.i, m.id, m."offset"
               from unnest(v_pids, p_txn_ids, v_created) with ordinality as x(pid, t, cr, i)
               cross join lateral (
                 select mm.id, mm."offset" from ${schema}.messages mm
                  where mm.partition_id = x.pid and mm.transaction_id = x.t and mm.transaction_id is not null
                 offset 0) m
              where x.t is not null and x.cr is not true loop
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
  select x.pid, x.o, x.id, x.t, x.tr, x.pl, x.ty, x.ve, x.kid
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

create or replace function ${schema}.push_fast(p_pair_queues text[], p_pair_partitions text[], p_item_pair int[],
                                    p_item_rank int[], p_ids uuid[], p_payloads jsonb[], p_trace_ids text[],
                                    p_txn_ids text[], p_types text[] default null, p_versions int[] default null,
                                    p_key_ids text[] default null)
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
  select v_pids[x.pk], v_next[x.pk] + x.rk, x.id, x.t, x.tr, x.pl, x.ty, x.ve, x.kid
    from unnest(p_item_pair, p_item_rank, p_ids, p_txn_ids, p_trace_ids, p_payloads, p_types, p_versions, p_key_ids)
         as x(pk, rk, id, t, tr, pl, ty, ve, kid);

  update ${schema}.partitions pp
     set next_offset = s.nxt + s.cnt, last_message_at = now()
    from (select v_pids[c.pk] as pid, v_next[c.pk] as nxt, count(*) as cnt
            from unnest(p_item_pair) as c(pk) group by c.pk) s
   where pp.id = s.pid and pp.id = any(v_pids);

  update ${schema}.cursors c set has_pending = true
   where c.partition_id = any(v_pids) and not c.has_pending;

  return query select g.k::int, v_pids[g.k], v_next[g.k] from generate_subscripts(v_pids, 1) as g(k);
end $$;

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
     group by x.pid, x.grp, x.lease),
  target as (
    select cu.partition_id, cu.group_name, g.mx, g.lease
      from g
      join ${schema}.cursors cu on cu.partition_id = g.pid and cu.group_name = g.grp
     where cu.partition_id = any(p_pids) and g.ok and cu.lease_id = g.lease and cu.lease_expires_at > now() and cu.lease_redrive is null
       and cu.acked_ahead is null and g.mn = cu.committed_offset + 1 and g.mx = cu.lease_to
       and g.nd = g.mx - g.mn + 1
     order by cu.partition_id, cu.group_name
       for update of cu),
  -- the partitions these settlements drain (the cursor reaches the newest message as last read), SHARE-locked with
  -- SKIP LOCKED in id order: one a push holds is skipped and its cursor keeps the flag; a locked row is read at its
  -- newest version, so a push that committed meanwhile keeps the flag set too
  locked as (
    select p.id, p.next_offset from ${schema}.partitions p
     where p.id = any(p_pids)
       and p.id in (select t.partition_id from target t join ${schema}.partitions p2 on p2.id = t.partition_id
                     where p2.id = any(p_pids) and t.mx >= p2.next_offset - 1)
     order by p.id
       for share skip locked),
  done as (
    update ${schema}.cursors cu
       set committed_offset = t.mx, attempts = 0, last_error = null, retry_at = null, acked_ahead = null,
           lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null,
           has_pending = case when l.id is not null and t.mx >= l.next_offset - 1
                               and not exists (select 1 from ${schema}.redeliveries r
                                                where r.partition_id = t.partition_id and r.group_name = t.group_name)
                              then false else cu.has_pending end
      from target t left join locked l on l.id = t.partition_id
     where cu.partition_id = any(p_pids) and cu.partition_id = t.partition_id and cu.group_name = t.group_name
    returning cu.partition_id, cu.group_name, cu.committed_offset, t.lease)
  select array_agg(d.partition_id), array_agg(d.group_name), array_agg(d.lease), (select count(*) from g)
    into v_fast_pids, v_fast_groups, v_fast_leases, v_groups from done d;

  if v_fast_pids is not null then
    -- the redelivery check above saw the statement's snapshot, taken before it waited for any cursor row: a dead
    -- letter redriven into one of these partitions by a transaction that held the row and committed while we waited
    -- is seen here, with a fresh snapshot, and the flag set again (a write only in that case)
    if exists (select 1 from unnest(v_fast_pids, v_fast_groups) as f(pid, grp)
                where exists (select 1 from ${schema}.redeliveries r
                               where r.partition_id = any(v_fast_pids) and r.partition_id = f.pid
                                 and r.group_name = f.grp)) then
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
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[]) set enable_seqscan = off;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[])
  set plan_cache_mode = force_generic_plan;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[]) set enable_hashjoin = off;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[]) set enable_mergejoin = off;

create or replace function ${schema}.pop(p_queue text, p_group text, p_batch int, p_max_partitions int, p_partition text,
                              p_lease_ms bigint, p_owner text, p_mode text, p_from timestamptz,
                              p_auto_ack boolean, p_after bigint default null)
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
  -- nodes whose heartbeat is older than their session timeout: their leases are free (V11)
  select array_agg(n.node_id) into v_dead from ${schema}.nodes n where n.dead_after <= now();

  -- The candidates, one query per case so that each keeps one plan (V6__pop_plans.sql): the group's pending
  -- partitions in id order after p_after (where this caller's previous pop stopped), then from the first up to
  -- it, through the cursors_ready index; or the one named.
  <<passes>>
  loop
    if p_partition is not null then
      open v_candidates for
        select cu.partition_id as pid, cu.committed_offset, cu.attempts, cu.lease_id as old_lease, cu.lease_owner,
               cu.lease_redrive, cu.last_error, cu.lease_expires_at, p.name as pname, p.next_offset, p.first_offset
          from ${schema}.partitions p
          join ${schema}.cursors cu on cu.partition_id = p.id and cu.group_name = p_group
         where p.id = (select pp.id from ${schema}.partitions pp where pp.queue_id = v_qid and pp.name = p_partition)
           and cu.has_pending
           and (cu.lease_expires_at is null or cu.lease_expires_at <= now() or cu.lease_owner = any(v_dead))
           and (cu.retry_at is null or cu.retry_at <= now())
           and (q.window_buffer_ms = 0 or p.last_message_at <= now() - ((q.window_buffer_ms) * interval '1 millisecond'))
         limit p_max_partitions
           for update of cu skip locked;
    elsif v_pass = 1 then
      open v_candidates for
        select cu.partition_id as pid, cu.committed_offset, cu.attempts, cu.lease_id as old_lease, cu.lease_owner,
               cu.lease_redrive, cu.last_error, cu.lease_expires_at, p.name as pname, p.next_offset, p.first_offset
          from ${schema}.cursors cu
          join lateral (select pp.name, pp.next_offset, pp.first_offset, pp.last_message_at
                          from ${schema}.partitions pp where pp.id = cu.partition_id offset 0) p on true
         where cu.queue_id = v_qid and cu.group_name = p_group and cu.has_pending and cu.partition_id > coalesce(p_after, -1)
           and (cu.lease_expires_at is null or cu.lease_expires_at <= now() or cu.lease_owner = any(v_dead))
           and (cu.retry_at is null or cu.retry_at <= now())
           and (q.window_buffer_ms = 0 or p.last_message_at <= now() - ((q.window_buffer_ms) * interval '1 millisecond'))
         order by cu.partition_id
         limit p_max_partitions
           for update of cu skip locked;
    else
      -- the second pass wraps around: the partitions up to where the caller's previous pop stopped
      open v_candidates for
        select cu.partition_id as pid, cu.committed_offset, cu.attempts, cu.lease_id as old_lease, cu.lease_owner,
               cu.lease_redrive, cu.last_error, cu.lease_expires_at, p.name as pname, p.next_offset, p.first_offset
          from ${schema}.cursors cu
          join lateral (select pp.name, pp.next_offset, pp.first_offset, pp.last_message_at
                          from ${schema}.partitions pp where pp.id = cu.partition_id offset 0) p on true
         where cu.queue_id = v_qid and cu.group_name = p_group and cu.has_pending and cu.partition_id <= p_after
           and (cu.lease_expires_at is null or cu.lease_expires_at <= now() or cu.lease_owner = any(v_dead))
           and (cu.retry_at is null or cu.retry_at <= now())
           and (q.window_buffer_ms = 0 or p.last_message_at <= now() - ((q.window_buffer_ms) * interval '1 millisecond'))
         order by cu.partition_id
         limit p_max_partitions - v_fetched
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
      if c.old_lease is not null and not v_counts then
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
        exit when v_remaining <= 0;
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
        -- nothing deliverable now: maybe the flag is stale
        if v_committed >= c.next_offset - 1 then
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
      exit when v_remaining <= 0;
    end loop;
    close v_candidates;
    exit passes when p_partition is not null or p_after is null or v_pass = 2 or v_remaining <= 0
                     or v_fetched >= p_max_partitions;
    v_pass := 2;
  end loop;
end $$;

alter function ${schema}.pop(text, text, int, int, text, bigint, text, text, timestamptz, boolean, bigint)
  set enable_seqscan = off;
alter function ${schema}.pop(text, text, int, int, text, bigint, text, text, timestamptz, boolean, bigint)
  set plan_cache_mode = force_generic_plan;
alter function ${schema}.pop(text, text, int, int, text, bigint, text, text, timestamptz, boolean, bigint)
  set enable_hashjoin = off;
alter function ${schema}.pop(text, text, int, int, text, bigint, text, text, timestamptz, boolean, bigint)
  set enable_mergejoin = off;

create or replace function ${schema}.renew(p_pids bigint[], p_groups text[], p_leases uuid[])
returns table(partition_id bigint, group_name text, lease_id uuid)
language sql as $$
  with held as (
    select cu.partition_id, cu.group_name
      from (select distinct x.pid, x.grp, x.lease from unnest(p_pids, p_groups, p_leases) as x(pid, grp, lease)) x
      join ${schema}.cursors cu on cu.partition_id = x.pid and cu.group_name = x.grp
     where cu.partition_id = any(p_pids) and cu.lease_id = x.lease and cu.lease_expires_at > now()
     order by cu.partition_id, cu.group_name
       for update of cu)
  update ${schema}.cursors cu
     set lease_expires_at = now() + coalesce(cu.lease_ms, 30000) * interval '1 millisecond'
    from held h
   where cu.partition_id = any(p_pids) and cu.partition_id = h.partition_id and cu.group_name = h.group_name
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
     where cu.partition_id = any(p_pids) and cu.lease_id = x.lease
     order by cu.partition_id, cu.group_name
       for update of cu)
  update ${schema}.cursors cu
     set lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null,
         lease_redrive = null, acked_ahead = null
    from held h
   where cu.partition_id = any(p_pids) and cu.partition_id = h.partition_id and cu.group_name = h.group_name;
  get diagnostics v = row_count;
  return v;
end $$;

drop index ${schema}.cursors_group;
create index cursors_queue on ${schema}.cursors (queue_id);
