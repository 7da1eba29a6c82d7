-- incr: adds p_delta to a live key's integer value, or creates it at p_delta with the TTL (a TTL applies on creation
-- only). 'type' when the value is not an integer, 'limit' past p_max. A new version from kv_versions.

create or replace function ${schema}.kv_incr(p_ns text, p_key text, p_delta bigint, p_ttl_ms bigint,
                                             p_forever boolean, p_max bigint default null::bigint)
returns ${schema}.kv_result
language plpgsql
set enable_seqscan = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  r record;
  v_exists boolean;
  v_cur numeric;
  v_new numeric;
  v_tries int := 0;
  v_out ${schema}.kv_result;
begin
  perform ${schema}.kv_check(p_ns, p_key);
  perform ${schema}.kv_expiry(p_ttl_ms, p_forever);
  if p_delta is null then
    raise exception 'kv: incr needs a delta' using errcode = '22023';
  end if;
  loop
    select k.value, k.version, k.expires_at into r
      from ${schema}.kv k where k.namespace = p_ns and k.key = p_key
       for update;
    v_exists := found;
    if v_exists and (r.expires_at is null or r.expires_at > now()) then
      if jsonb_typeof(r.value) <> 'number' then
        return row(false, 'type', true, r.value, r.version, r.expires_at)::${schema}.kv_result;
      end if;
      v_cur := (r.value #>> '{}')::numeric;
      if v_cur <> trunc(v_cur) then
        return row(false, 'type', true, r.value, r.version, r.expires_at)::${schema}.kv_result;
      end if;
      v_new := v_cur + p_delta;
      if p_max is not null and v_new > p_max then
        return row(false, 'limit', true, r.value, r.version, r.expires_at)::${schema}.kv_result;
      end if;
      if v_new < -9223372036854775808 or v_new > 9223372036854775807 then
        return row(false, 'type', true, r.value, r.version, r.expires_at)::${schema}.kv_result;
      end if;
      update ${schema}.kv k
         set value = to_jsonb(v_new::bigint), version = nextval('${schema}.kv_versions')
       where k.namespace = p_ns and k.key = p_key
      returning true, null::text, true, k.value, k.version, k.expires_at into v_out;
      return v_out;
    end if;
    -- absent or expired: a fresh key (a fresh window) at p_delta, written as put writes a key that must be absent
    if p_max is not null and p_delta > p_max then
      return row(false, 'limit', false, null, 0, null)::${schema}.kv_result;
    end if;
    v_out := ${schema}.kv_put(p_ns, p_key, p_delta::text, p_ttl_ms, p_forever, 0);
    if v_out.reason is distinct from 'exists' then
      return v_out;
    end if;
    -- a concurrent transaction created the key meanwhile: add to it
    v_tries := v_tries + 1;
    if v_tries >= 20 then
      raise exception 'kv: could not settle a concurrent write of one key' using errcode = '40001';
    end if;
  end loop;
end $$;
