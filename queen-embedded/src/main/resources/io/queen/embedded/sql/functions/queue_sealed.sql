-- Row trigger before a queue row gets encryption on: marks the queue sealed for good (it may hold sealed payloads).

create or replace function ${schema}.queue_sealed()
returns trigger
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
begin
  new.sealed := true;
  return new;
end $$;
