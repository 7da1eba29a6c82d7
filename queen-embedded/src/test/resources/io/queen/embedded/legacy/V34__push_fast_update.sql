-- push_fast's closing update without a join (issue 14: the end-to-end producer; issue 11).
--
-- The end-to-end benchmark's producer pushes 128 items over 128 partitions per call, and is what limits that figure:
-- the consumers keep up, and a push took 10-13 ms. pg_stat_statements and auto_explain on one server put 2.6-3.1 ms
-- of it in the update that moves the partitions' next_offset: planned (generic plan, hash and merge joins off, the
-- partitions restricted to the call's own ids) as a nested loop that read the 128 rows and filtered the 128 pairs
-- for each, 16,256 rows removed by the join filter per call. Quadratic in the number of partitions a push names.
-- Now the new offsets are computed once per pair (a grouped count, v_new_next) and the update scans the pairs' rows
-- through the primary key alone, each taking its value at its place in v_pids (array_position: still a linear search
-- per row, but in C over an array instead of an executor join). psql, 128 partitions, each form in its own
-- transaction, 12 runs: 2.15-2.46 ms against 0.59-0.68 ms. The rest of the body is V32's; the signature and the
-- results are unchanged.
create or replace function ${schema}.push_fast(p_pair_queues text[], p_pair_partitions text[], p_item_pair int[],
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

  -- one scan of the pairs' rows through the key, each row's value found by its place in v_pids (no join: a join of
  -- the rows with the pairs ran as a nested loop filtering every pair for every row)
  update ${schema}.partitions pp
     set next_offset = v_new_next[array_position(v_pids, pp.id)], last_message_at = now()
   where pp.id = any(v_pids);

  update ${schema}.cursors c set has_pending = true
   where c.partition_id = any(v_pids) and not c.has_pending;

  -- a receipt for each pair whose items came without a transaction id (their generated ids are not indexed)
  if p_pair_anchors is not null then
    insert into ${schema}.push_receipts(anchor, partition_id, first_offset)
    select x.a, v_pids[x.k], v_next[x.k] from unnest(p_pair_anchors) with ordinality as x(a, k) where x.a is not null;
  end if;

  return query select g.k::int, v_pids[g.k], v_next[g.k] from generate_subscripts(v_pids, 1) as g(k);
end $$;
