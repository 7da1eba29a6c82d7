-- Statement trigger after a delete from queues: deletes their partitions (what "on delete cascade" would do).

create or replace function ${schema}.queues_delete_partitions()
returns trigger
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
begin
  delete from ${schema}.partitions p where p.queue_id in (select o.id from deleted_queues o);
  return null;
end $$;
