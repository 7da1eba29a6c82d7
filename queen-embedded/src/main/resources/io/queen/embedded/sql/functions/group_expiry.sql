-- Creates a group (when missing) for a consume loop and stores whether an expired lease counts as an attempt for it
-- (p_counts: the SPI's ConsumeSpec.expiryCounts; false for a consumer that counts attempts itself, a Postgres sink).
-- Returns false when the queue does not exist: like pop, reading a queue creates nothing.

create or replace function ${schema}.group_expiry(p_queue text, p_group text, p_mode text,
                                                  p_from timestamp with time zone, p_counts boolean)
returns boolean
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  v_qid bigint;
begin
  select q.id into v_qid from ${schema}.queues q where q.name = p_queue;
  if not found then
    return false; -- like pop: reading a queue that does not exist creates nothing
  end if;
  perform ${schema}.ensure_group(v_qid, p_group, p_mode, p_from);
  update ${schema}.consumer_groups g set expiry_counts = p_counts
   where g.queue_id = v_qid and g.name = p_group and g.expiry_counts is distinct from p_counts;
  return true;
end $$;
