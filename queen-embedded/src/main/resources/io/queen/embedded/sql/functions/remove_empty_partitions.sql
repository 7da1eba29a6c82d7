-- Removes the partitions among p_ids that hold no message and had no push for p_idle_ms, checking each again under
-- its row lock (a push that found it before the lock sees it missing and retries); returns the count per queue.

create or replace function ${schema}.remove_empty_partitions(p_ids bigint[], p_idle_ms bigint)
returns table(queue_name text, removed bigint)
language plpgsql
set enable_seqscan = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
begin
  return query
  with gone as (
    delete from ${schema}.partitions pp
     where pp.id in (
             select p.id from ${schema}.partitions p
              where p.id = any(p_ids) and p.first_offset >= p.next_offset
                and p.last_message_at <= now() - p_idle_ms * interval '1 millisecond'
                and not exists (select 1 from ${schema}.cursors cu where cu.partition_id = p.id and cu.lease_id is not null)
                and not exists (select 1 from ${schema}.redeliveries r where r.partition_id = p.id)
                and not exists (select 1 from ${schema}.dead_letters d where d.partition_id = p.id)
                and not exists (select 1 from ${schema}.retention_losses l where l.partition_id = p.id)
              order by p.id
                for update of p skip locked)
    returning pp.queue_id)
  select q.name, count(*) from gone g join ${schema}.queues q on q.id = g.queue_id group by q.name;
end $$;
