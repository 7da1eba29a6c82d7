-- push_partition: the common push into ONE partition in three plain statements (issue 11: push at the speed of an
-- INSERT).
--
-- push_fast serves any number of partitions, so each of its statements works on arrays: the look-up aggregates the
-- pairs (four aggregates over an unnest with two lateral probes), the lock aggregates ids and offsets, the insert
-- unnests nine arrays, the closing update groups the items by pair. For one message that machinery is most of the
-- call: measured with pgbench (one client, synchronous_commit off, pg_stat_statements track = all) a single-message
-- push_fast took 211 us of server time, its statements 93 us of it; perf showed 23 % of the backend in
-- ExecutorStart (ExecInitAgg alone 10 %, the nine-array FunctionScan 8.5 %). Most pushes name one partition: every
-- single-message push, and every batch into one partition (a hot key, an ordered stream).
--
-- Here one UPDATE ... RETURNING finds the partition through its queue, takes its row lock and moves next_offset;
-- what it returns is where this push's offsets start. The lock is the one push_fast took (FOR NO KEY UPDATE, held
-- to the commit) and a push that waited for it reads the newest committed next_offset (the update is re-checked
-- on the newest row version), so offsets stay gapless and commit-ordered; the separate lock statement and its WAL
-- record are gone. One message is inserted from scalars (no FunctionScan). The has_pending update stays a statement
-- of its own, after the lock, as in push_fast (its snapshot must see a drain that committed while we waited).
--
-- Nothing is written and both outputs are NULL when the queue or partition is missing, the queue is bounded
-- (maxSize needs push's per-queue lock), or the queue is encrypted and an item is not sealed: the node then takes
-- the full push, which creates, checks the size, or refuses the plain payload (QU002) as before. Same settings as
-- push_fast (V5): index probes, one generic plan per session, nested loops.

create function ${schema}.push_partition(p_queue text, p_partition text, p_ids uuid[], p_payloads jsonb[],
                                         p_trace_ids text[], p_txn_ids text[], p_types text[] default null,
                                         p_versions int[] default null, p_key_ids text[] default null,
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
            p_payloads[1], p_types[1], p_versions[1], p_key_ids[1]);
  else
    insert into ${schema}.messages(partition_id, "offset", id, transaction_id, trace_id, payload, payload_type,
                                   payload_version, key_id)
    select push_partition.partition_id, push_partition.first_offset + x.o - 1, x.id, x.t, x.tr, x.pl, x.ty, x.ve, x.kid
      from unnest(p_ids, p_txn_ids, p_trace_ids, p_payloads, p_types, p_versions, p_key_ids)
           with ordinality as x(id, t, tr, pl, ty, ve, kid, o);
  end if;

  update ${schema}.cursors c set has_pending = true
   where c.partition_id = push_partition.partition_id and not c.has_pending;
end $$;
