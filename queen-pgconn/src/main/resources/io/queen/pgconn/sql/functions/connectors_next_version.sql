-- The trigger of connectors: an inserted row, or an update that changes the version, takes the next value of
-- connectors_version.

create or replace function ${schema}.connectors_next_version()
returns trigger
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
begin
  if tg_op = 'INSERT' or new.version is distinct from old.version then
    new.version := nextval('${schema}.connectors_version');
  end if;
  return new;
end $$;
