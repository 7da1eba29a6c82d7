-- Moves every cursor of a group: p_mode 'BEGINNING', 'END' or 'TIME' (the first message at or after p_at).

create or replace function ${schema}.seek(p_queue text, p_group text, p_mode text, p_at timestamp with time zone)
returns integer
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  v_qid bigint;
  r record;
  v int := 0;
begin
  select id into v_qid from ${schema}.queues where name = p_queue;
  if v_qid is null then
    return 0;
  end if;
  perform ${schema}.ensure_group(v_qid, p_group, 'NEW', null);
  for r in select p.id, p.next_offset, p.first_offset
             from ${schema}.partitions p where p.queue_id = v_qid order by p.id for share loop
    update ${schema}.cursors cu
       set committed_offset = case p_mode
             when 'BEGINNING' then r.first_offset - 1
             when 'END' then r.next_offset - 1
             else coalesce((select min(m."offset") - 1 from ${schema}.messages m
                             where m.partition_id = r.id and m.created_at >= p_at), r.next_offset - 1) end,
           lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null,
           lease_redrive = null, acked_ahead = null, attempts = 0, last_error = null, retry_at = null
     where cu.partition_id = r.id and cu.group_name = p_group;
    update ${schema}.cursors cu
       set has_pending = cu.committed_offset < r.next_offset - 1
                         or exists (select 1 from ${schema}.redeliveries d
                                     where d.partition_id = r.id and d.group_name = p_group)
     where cu.partition_id = r.id and cu.group_name = p_group;
    v := v + 1;
  end loop;
  return v;
end $$;
