-- put: writes a key; with p_expect (0 = absent), only if its version is that ('version' or 'exists' otherwise).
-- Versions come from the sequence kv_versions, so a key deleted and written again never repeats a version a client
-- may hold.

create or replace function ${schema}.kv_put(p_ns text, p_key text, p_value text, p_ttl_ms bigint, p_forever boolean,
                                            p_expect bigint default null::bigint)
returns ${schema}.kv_result
language plpgsql
set enable_seqscan = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  v_value jsonb;
  v_exp timestamptz;
  r record;
  v_live boolean;
  v_tries int := 0;
  v_out ${schema}.kv_result;
begin
  perform ${schema}.kv_check(p_ns, p_key);
  v_value := ${schema}.kv_value(p_value);
  v_exp := ${schema}.kv_expiry(p_ttl_ms, p_forever);
  if p_expect is not null and p_expect < 0 then
    raise exception 'kv: expect must be >= 0 (0 = absent), was %', p_expect using errcode = '22023';
  end if;
  loop
    select k.value, k.version, k.expires_at into r
      from ${schema}.kv k where k.namespace = p_ns and k.key = p_key
       for update;
    if found then
      v_live := r.expires_at is null or r.expires_at > now();
      if v_live and p_expect = 0 then
        return row(false, 'exists', true, r.value, r.version, r.expires_at)::${schema}.kv_result;
      elsif v_live and p_expect > 0 and r.version <> p_expect then
        return row(false, 'version', true, r.value, r.version, r.expires_at)::${schema}.kv_result;
      elsif not v_live and p_expect > 0 then
        return row(false, 'absent', false, null, 0, null)::${schema}.kv_result;
      end if;
      update ${schema}.kv k
         set value = v_value, version = nextval('${schema}.kv_versions'), expires_at = v_exp
       where k.namespace = p_ns and k.key = p_key
      returning true, null::text, true, k.value, k.version, k.expires_at into v_out;
      return v_out;
    end if;
    if p_expect > 0 then
      return row(false, 'absent', false, null, 0, null)::${schema}.kv_result;
    end if;
    insert into ${schema}.kv as k (namespace, key, value, version, expires_at)
    values (p_ns, p_key, v_value, nextval('${schema}.kv_versions'), v_exp)
    on conflict (namespace, key) do nothing
    returning true, null::text, true, k.value, k.version, k.expires_at into v_out;
    if found then
      return v_out;
    end if;
    -- a concurrent transaction created the key between our lock attempt and our insert: lock it
    v_tries := v_tries + 1;
    if v_tries >= 20 then
      raise exception 'kv: could not settle a concurrent write of one key' using errcode = '40001';
    end if;
  end loop;
end $$;
