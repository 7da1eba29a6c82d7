-- delete: removes a live key ('absent' when there is none); with p_expect, only if its version is p_expect ('version'
-- otherwise). Applied: found = false afterwards.

create or replace function ${schema}.kv_delete(p_ns text, p_key text, p_expect bigint default null::bigint)
returns ${schema}.kv_result
language plpgsql
set enable_seqscan = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  r record;
begin
  perform ${schema}.kv_check(p_ns, p_key);
  select k.value, k.version, k.expires_at into r
    from ${schema}.kv k where k.namespace = p_ns and k.key = p_key
     for update;
  if not found or not (r.expires_at is null or r.expires_at > now()) then
    return row(false, 'absent', false, null, 0, null)::${schema}.kv_result;
  end if;
  if p_expect is not null and r.version <> p_expect then
    return row(false, 'version', true, r.value, r.version, r.expires_at)::${schema}.kv_result;
  end if;
  delete from ${schema}.kv k where k.namespace = p_ns and k.key = p_key;
  return row(true, null, false, null, 0, null)::${schema}.kv_result;
end $$;
