-- Creates a consumer group and its cursors. Locks the queue row FOR UPDATE: a push that creates a partition holds a
-- KEY SHARE lock on it (partitions_queue_exists), so partitions created concurrently are either seen here or see the
-- group when they create their cursors. Partitions are SHARE-locked so that pushes in flight commit before the start
-- offsets are read.

create or replace function ${schema}.ensure_group(p_qid bigint, p_group text, p_mode text,
                                                  p_from timestamp with time zone)
returns void
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
begin
  if exists (select 1 from ${schema}.consumer_groups where queue_id = p_qid and name = p_group) then
    return;
  end if;
  perform 1 from ${schema}.queues where id = p_qid for update;
  insert into ${schema}.consumer_groups(queue_id, name, mode, start_at)
  values (p_qid, p_group, p_mode, p_from) on conflict do nothing;
  if not found then
    return;
  end if;
  perform 1 from ${schema}.partitions where queue_id = p_qid order by id for share;
  insert into ${schema}.cursors(partition_id, group_name, queue_id, committed_offset, has_pending)
  select p.id, p_group, p_qid, s.c, s.c < p.next_offset - 1
    from ${schema}.partitions p
    cross join lateral (
      select case p_mode
               when 'ALL' then p.first_offset - 1
               when 'NEW' then p.next_offset - 1
               else coalesce((select max(m."offset") from ${schema}.messages m
                               where m.partition_id = p.id and m.created_at < p_from), p.first_offset - 1)
             end as c) s
   where p.queue_id = p_qid
  on conflict do nothing;
end $$;
