-- push_fast for a batch into one partition: one update finds and locks the partition row and takes the offsets, one
-- insert stores the items.

create or replace function ${schema}.push_partition(p_queue text, p_partition text, p_ids uuid[], p_payloads text[],
                                                    p_trace_ids text[], p_txn_ids text[],
                                                    p_types text[] default null::text[],
                                                    p_versions integer[] default null::integer[],
                                                    p_key_ids text[] default null::text[],
                                                    p_anchors uuid[] default null::uuid[],
                                                    p_anchor_starts integer[] default null::integer[],
                                                    OUT partition_id bigint, OUT first_offset bigint)
returns record
language plpgsql
set enable_seqscan = off
set plan_cache_mode = force_generic_plan
set enable_hashjoin = off
set enable_mergejoin = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  n int := coalesce(cardinality(p_ids), 0);
  v_sealed boolean := p_key_ids is not null and array_position(p_key_ids, null) is null;
  v_tid tid;
begin
  if n = 0 or cardinality(p_payloads) <> n or cardinality(p_txn_ids) <> n or cardinality(p_trace_ids) <> n then
    raise exception 'push_partition: argument arrays are empty or differ in length' using errcode = '22023';
  end if;

  -- the partition row found newest version first and locked (a lock that waited for another push returns the
  -- row that push left), then written through its ctid
  select p0.tid into v_tid
    from ${schema}.queues q
    cross join lateral (select pp.ctid as tid from ${schema}.partitions pp
                         where pp.queue_id >= q.id and pp.queue_id <= q.id
                           and pp.name >= p_partition and pp.name <= p_partition
                         order by pp.queue_id desc, pp.name desc limit 1
                           for no key update) p0
   where q.name = p_queue and q.max_size = 0 and (v_sealed or not q.encryption);
  if v_tid is null then
    return;
  end if;
  update ${schema}.partitions pp set next_offset = pp.next_offset + n, last_message_at = now()
   where pp.ctid = v_tid
  returning pp.id, pp.next_offset - n into partition_id, first_offset;

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
