-- Dead-letter moves are told to the client that caused them, so the node can log them for operators (a
-- WARN with queue, group, partition, offset and the last error). They happen inside pop (a lease that
-- expired once too often) and ack (a failure past retryLimit), so a notice is the one channel that
-- reaches the node from both without changing their results. Rare by nature, so it costs nothing on the
-- hot paths. client_min_messages is set on the function so that an application DataSource configured
-- to hide notices still lets this one through.
create or replace function ${schema}.dead_letter(p_qid bigint, p_keep boolean, p_pid bigint, p_offset bigint,
                                                 p_group text, p_error text, p_attempts int) returns void
language plpgsql as $$
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
alter function ${schema}.dead_letter(bigint, boolean, bigint, bigint, text, text, int) set client_min_messages = notice;
