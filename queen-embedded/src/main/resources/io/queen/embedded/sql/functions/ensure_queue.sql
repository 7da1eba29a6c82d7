-- The id of a queue, created when missing.

create or replace function ${schema}.ensure_queue(p_name text)
returns bigint
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  v bigint;
begin
  select id into v from ${schema}.queues where name = p_name;
  if v is null then
    insert into ${schema}.queues(name) values (p_name) on conflict (name) do nothing returning id into v;
    if v is null then
      select id into v from ${schema}.queues where name = p_name;
    end if;
  end if;
  return v;
end $$;
