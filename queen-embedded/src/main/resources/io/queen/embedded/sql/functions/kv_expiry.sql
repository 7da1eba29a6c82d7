-- The expiry of a KV write: exactly one of a ttl above zero (milliseconds) or forever.

create or replace function ${schema}.kv_expiry(p_ttl_ms bigint, p_forever boolean)
returns timestamp with time zone
language plpgsql
stable
set jit = off
set max_parallel_workers_per_gather = 0
as $$
begin
  if coalesce(p_forever, false) = (p_ttl_ms is not null) then
    raise exception 'kv: every write needs exactly one of a ttl above zero or forever (got %)',
      case when p_ttl_ms is null then 'neither' else 'both' end using errcode = '22023';
  end if;
  if p_forever then
    return null;
  end if;
  if p_ttl_ms <= 0 then
    raise exception 'kv: ttl must be above zero, was % ms', p_ttl_ms using errcode = '22023';
  end if;
  return now() + p_ttl_ms * interval '1 millisecond';
end $$;
