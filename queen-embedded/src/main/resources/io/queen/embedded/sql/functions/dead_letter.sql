-- Records a dead letter (when the queue keeps them) and tells the client that caused it with a notice
-- (queen:dead_letter), so the node can log it for operators. It runs inside pop (a lease expired once too often) and
-- ack (a failure past retryLimit); client_min_messages is set on the function so that a DataSource configured to hide
-- notices still lets this one through.

create or replace function ${schema}.dead_letter(p_qid bigint, p_keep boolean, p_pid bigint, p_offset bigint,
                                                 p_group text, p_error text, p_attempts integer)
returns void
language plpgsql
set client_min_messages = notice
set jit = off
set max_parallel_workers_per_gather = 0
as $$
begin
  if p_keep then
    insert into ${schema}.dead_letters(queue_id, partition_id, "offset", group_name, message_id, error, attempts)
    select p_qid, p_pid, p_offset, p_group, m.id, p_error, p_attempts
      from ${schema}.messages m where m.partition_id = p_pid and m."offset" = p_offset;
  end if;
  raise notice using message = 'queen:dead_letter',
    detail = (select json_build_object('queue', q.name, 'partition', p.name, 'group', p_group, 'offset', p_offset,
                                       'attempts', p_attempts, 'kept', p_keep, 'error', left(p_error, 500))::text
                from ${schema}.partitions p join ${schema}.queues q on q.id = p.queue_id where p.id = p_pid);
end $$;
