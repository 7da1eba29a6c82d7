-- The push of a batch whose items have fresh ids and no transaction ids, into unbounded queues: items grouped by
-- (queue, partition) pairs, one update of the partition rows (locked in id order) that hands out the offsets, and one
-- insert. Returns each pair's partition and first offset; creates missing queues and partitions through the same
-- path as push.

create or replace function ${schema}.push_fast(p_pair_queues text[], p_pair_partitions text[], p_item_pair integer[],
                                               p_item_rank integer[], p_ids uuid[], p_payloads text[],
                                               p_trace_ids text[], p_txn_ids text[],
                                               p_types text[] default null::text[],
                                               p_versions integer[] default null::integer[],
                                               p_key_ids text[] default null::text[],
                                               p_pair_anchors uuid[] default null::uuid[])
returns table(pair integer, partition_id bigint, first_offset bigint)
language plpgsql
set enable_seqscan = off
set plan_cache_mode = force_generic_plan
set enable_hashjoin = off
set enable_mergejoin = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  v_pids bigint[];
  v_all boolean;
  v_bounded boolean;
  v_plain text;
  v_lock_ids bigint[];
  v_lock_next bigint[];
  v_lock_tids tid[];
  v_next bigint[];
  v_new_next bigint[];
  k int;
  m int := cardinality(p_pair_queues);
begin
  select array_agg(pp.id order by x.k), bool_and(pp.id is not null), coalesce(bool_or(q.max_size > 0), false),
         min(case when q.encryption then x.qn end)
    into v_pids, v_all, v_bounded, v_plain
    from unnest(p_pair_queues, p_pair_partitions) with ordinality as x(qn, p, k)
    left join lateral (select qq.id, qq.max_size, qq.encryption from ${schema}.queues qq where qq.name = x.qn offset 0) q on true
    left join lateral (select pp0.id from ${schema}.partitions pp0
                        where pp0.queue_id >= q.id and pp0.queue_id <= q.id and pp0.name >= x.p and pp0.name <= x.p
                        order by pp0.queue_id desc, pp0.name desc limit 1) pp on true;
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

  -- partition rows in a fixed order: offsets are taken under these locks. Each row is found newest version
  -- first and locked (a lock that waited for another push returns the row that push left, and its ctid)
  select array_agg(l.id order by s.id), array_agg(l.next_offset order by s.id), array_agg(l.tid order by s.id)
    into v_lock_ids, v_lock_next, v_lock_tids
    from (select distinct x.id from unnest(v_pids) as x(id) order by x.id) s
    cross join lateral (select pp.ctid as tid, pp.id, pp.next_offset from ${schema}.partitions pp
                         where pp.id >= s.id and pp.id <= s.id order by pp.id desc limit 1
                           for no key update) l;
  v_next := array_fill(0::bigint, array[m]);
  for k in 1 .. m loop
    v_next[k] := v_lock_next[array_position(v_lock_ids, v_pids[k])];
  end loop;
  -- a partition the janitor removed after the look-up above found it (empty and idle) is missing from the locked
  -- rows: nothing is written, and the full push creates it anew
  if array_position(v_next, null) is not null then
    return;
  end if;
  -- each pair's next offset after this push: its first offset + its item count (pairs are numbered 1 .. m, each has
  -- at least one item)
  select array_agg(v_next[c.pk] + c.n order by c.pk) into v_new_next
    from (select x.pk, count(*) as n from unnest(p_item_pair) as x(pk) group by x.pk) c;

  -- p_types, p_versions and p_key_ids are null for a batch of untyped, plain payloads (unnest pads them)
  insert into ${schema}.messages(partition_id, "offset", id, transaction_id, trace_id, payload, payload_type,
                                 payload_version, key_id)
  select v_pids[x.pk], v_next[x.pk] + x.rk, x.id, x.t, x.tr, x.pl::jsonb, x.ty, x.ve, x.kid
    from unnest(p_item_pair, p_item_rank, p_ids, p_txn_ids, p_trace_ids, p_payloads, p_types, p_versions, p_key_ids)
         as x(pk, rk, id, t, tr, pl, ty, ve, kid);

  -- the locked rows through their ctids, each row's value found by its place in v_pids (no join: a join of
  -- the rows with the pairs ran as a nested loop filtering every pair for every row)
  update ${schema}.partitions pp
     set next_offset = v_new_next[array_position(v_pids, pp.id)], last_message_at = now()
   where pp.ctid = any(v_lock_tids);

  update ${schema}.cursors c set has_pending = true
   where c.partition_id = any(v_pids) and not c.has_pending;

  -- a receipt for each pair whose items came without a transaction id (their generated ids are not indexed)
  if p_pair_anchors is not null then
    insert into ${schema}.push_receipts(anchor, partition_id, first_offset)
    select x.a, v_pids[x.k], v_next[x.k] from unnest(p_pair_anchors) with ordinality as x(a, k) where x.a is not null;
  end if;

  return query select g.k::int, v_pids[g.k], v_next[g.k] from generate_subscripts(v_pids, 1) as g(k);
end $$;
