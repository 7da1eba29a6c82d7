-- Statement trigger after an insert into partitions (the foreign key to queues, checked once per statement instead of
-- once per row): KEY SHARE-locks the new partitions' queues in id order and raises 23503 when one does not exist.

create or replace function ${schema}.partitions_queue_exists()
returns trigger
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  v_qids bigint[];
  v_missing bigint;
begin
  select array_agg(distinct n.queue_id) into v_qids from new_partitions n;
  perform 1 from ${schema}.queues q where q.id = any(v_qids) order by q.id for key share;
  select x.qid into v_missing from unnest(v_qids) as x(qid)
   where not exists (select 1 from ${schema}.queues q where q.id = x.qid) limit 1;
  if v_missing is not null then
    raise exception 'a new partition names queue id %, which does not exist', v_missing using errcode = '23503';
  end if;
  return null;
end $$;
