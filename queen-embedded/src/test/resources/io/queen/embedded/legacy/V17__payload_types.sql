-- Typed payloads with schema versions, and encryption at rest (issue 12, sections 2 and 4).
--
-- messages: payload_type and payload_version (the type name and schema version of a typed payload, NULL for
-- an untyped one: never a Java class name), and key_id (the id of the node key that sealed the payload with
-- AES-256-GCM, NULL for a plain one; the payload column then holds a JSON string, base64 of nonce, ciphertext
-- and tag). Nullable columns without a default: adding them rewrites nothing, and an untyped plain message
-- stores three NULL bits.
--
-- queues: encryption (off by default). push and push_fast refuse an item without key_id for an encrypted
-- queue (SQLState QU002, detail = the queue): the node encrypts before it sends, from its cached view of the
-- queue's options, and this check catches a stale view. The check reads the queue row the lookup already
-- reads; an untyped, plain batch sends three NULL arrays more and pays nothing else.
--
-- pop is not replaced: the node reads the three columns by primary key next to the pop call, in the same
-- statement (Broker.popSql), so pop's body stays the one of V14.
--
-- push and push_fast are dropped and created again (their argument lists grow); every setting of V1, V5, V6
-- and V13 is given again.

alter table ${schema}.messages add column payload_type text, add column payload_version int, add column key_id text;
alter table ${schema}.queues add column encryption boolean not null default false;

drop function ${schema}.push_fast(text[], text[], int[], int[], uuid[], jsonb[], text[], text[]);

create function ${schema}.push_fast(p_pair_queues text[], p_pair_partitions text[], p_item_pair int[],
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
   where pp.id = s.pid;

  update ${schema}.cursors c set has_pending = true
   where c.partition_id = any(v_pids) and not c.has_pending;

  return query select g.k::int, v_pids[g.k], v_next[g.k] from generate_subscripts(v_pids, 1) as g(k);
end $$;

drop function ${schema}.push(text[], text[], jsonb[], text[], text[], boolean, uuid[]);

create function ${schema}.push(p_queues text[], p_partitions text[], p_payloads jsonb[], p_txn_ids text[],
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

    with pairs as (
      select distinct q.id as qid, x.p
        from unnest(p_queues, p_partitions) as x(qn, p)
        join lateral (select qq.id from ${schema}.queues qq where qq.name = x.qn offset 0) q on true),
    ins as (
      insert into ${schema}.partitions(queue_id, name)
      select pairs.qid, pairs.p from pairs
       where not exists (select 1 from ${schema}.partitions pp where pp.queue_id = pairs.qid and pp.name = pairs.p offset 0)
      on conflict (queue_id, name) do nothing
      returning id)
    select array_agg(id) into v_new from ins;

    if v_new is not null then
      -- a new statement, so groups committed while we waited on the queue row are visible
      insert into ${schema}.cursors(partition_id, group_name, queue_id, committed_offset, has_pending)
      select pp.id, g.name, pp.queue_id, -1, false
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
  select array_agg(l.id), array_agg(l.next_offset) into v_lock_ids, v_lock_next
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
      select coalesce(sum(pp.next_offset - pp.first_offset), 0) into v_size
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
   where pp.id = s.pid and s.mx + 1 > pp.next_offset;

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
