-- KV versions that never repeat for a key: each write takes its version from one sequence of the store.
--
-- Until now a key's version was 1 when it was created and +1 on every write of the live key, so a key deleted
-- (or expired) and written again started over at 1: a client holding version 3 of the first life of a key saw
-- its expect(3) succeed on the third write of the second life, the ABA case a compare-and-set exists to catch
-- (an idempotency marker or a limiter window with a TTL lives many lives). Now every write (put, putIfAbsent,
-- incr, over a live key, an expired row or none) takes nextval of ${schema}.kv_versions, as etcd's revisions
-- and Consul's modify indexes: a version is never given twice, to any key, across deletes and expiries too.
-- They grow with a key's writes (the sequence is not cached and an update draws its number under the row
-- lock; only a creation racing a delete of the same key can store a number drawn a moment before the last
-- write of the key's previous life), but they are no longer 1, 2, 3: compare a version for equality only.
-- The sequence starts above every version stored, with a margin of a million: while this migration runs, and
-- until every node runs this version, a node of the previous version may still add one to a version (its
-- kv_put call already running, its once() markers written as version 1); none gets near the sequence's range,
-- so no version a client holds now can come back. On an empty store it starts at 1. expect(0) still means
-- "absent".
-- The bodies are V2's (kv_put, kv_incr) and V38's (kv_write_many) otherwise; kv_delete writes no version. The
-- marker path of once() (KvStore.markersSql, a plain statement) takes its versions from the sequence too.

create sequence if not exists ${schema}.kv_versions as bigint minvalue 1 no cycle;
select setval('${schema}.kv_versions', coalesce((select max(k.version) from ${schema}.kv k) + 1000000, 1), false);

create or replace function ${schema}.kv_put(p_ns text, p_key text, p_value text, p_ttl_ms bigint, p_forever boolean,
                                 p_expect bigint default null)
returns ${schema}.kv_result
language plpgsql volatile set enable_seqscan = off as $fn$
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
end $fn$;

create or replace function ${schema}.kv_incr(p_ns text, p_key text, p_delta bigint, p_ttl_ms bigint, p_forever boolean,
                                  p_max bigint default null)
returns ${schema}.kv_result
language plpgsql volatile set enable_seqscan = off as $fn$
declare
  v_exp timestamptz;
  r record;
  v_exists boolean;
  v_cur numeric;
  v_new numeric;
  v_tries int := 0;
  v_out ${schema}.kv_result;
begin
  perform ${schema}.kv_check(p_ns, p_key);
  v_exp := ${schema}.kv_expiry(p_ttl_ms, p_forever);
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
    -- absent or expired: a fresh key (a fresh window) starting from 0
    if p_max is not null and p_delta > p_max then
      return row(false, 'limit', false, null, 0, null)::${schema}.kv_result;
    end if;
    if v_exists then
      update ${schema}.kv k
         set value = to_jsonb(p_delta), version = nextval('${schema}.kv_versions'), expires_at = v_exp
       where k.namespace = p_ns and k.key = p_key
      returning true, null::text, true, k.value, k.version, k.expires_at into v_out;
      return v_out;
    end if;
    insert into ${schema}.kv as k (namespace, key, value, version, expires_at)
    values (p_ns, p_key, to_jsonb(p_delta), nextval('${schema}.kv_versions'), v_exp)
    on conflict (namespace, key) do nothing
    returning true, null::text, true, k.value, k.version, k.expires_at into v_out;
    if found then
      return v_out;
    end if;
    v_tries := v_tries + 1;
    if v_tries >= 20 then
      raise exception 'kv: could not settle a concurrent write of one key' using errcode = '40001';
    end if;
  end loop;
end $fn$;

create or replace function ${schema}.kv_write_many(p_ops text[], p_ns text[], p_keys text[], p_values text[],
                                                   p_delta bigint[], p_ttl_ms bigint[], p_forever boolean[],
                                                   p_expect bigint[], p_max bigint[], p_required boolean[])
returns table(op_index int, w_applied boolean, w_reason text, w_found boolean, w_value text, w_version bigint,
              w_expires_at timestamptz)
language plpgsql volatile set enable_seqscan = off as $fn$
declare
  n int := coalesce(cardinality(p_ops), 0);
  r ${schema}.kv_result;
  j int;
  v_last int := 0;                            -- the leading put-if-absent writes are 1 .. v_last
  v_exp timestamptz[];                        -- their expiry, by ordinal
  v_ord jsonb;                                -- "namespace key" -> ordinal, for those writes
  v_made_at int[];                            -- ordinals the insert created
  v_made_vals text[];                         -- and their stored values, in the same order
  v_made_vers bigint[];                       -- and their versions
  v_made boolean[];                           -- by ordinal: created by the insert
  v_made_val text[];                          -- by ordinal: the stored value, as text
  v_made_ver bigint[];                        -- by ordinal: the version the insert gave it
begin
  v_exp := array_fill(null::timestamptz, array[greatest(n, 1)]);
  for j in 1 .. n loop
    exit when p_ops[j] <> 'PUT_IF_ABSENT'; -- the leading run only: see V4
    if p_ns[j] is null or octet_length(p_ns[j]) < 1 or octet_length(p_ns[j]) > 128 or p_ns[j] ~ '[^A-Za-z0-9._:-]'
       or p_keys[j] is null or octet_length(p_keys[j]) < 1 or octet_length(p_keys[j]) > 512 then
      perform ${schema}.kv_check(p_ns[j], p_keys[j]);
    end if;
    if p_values[j] is null or octet_length(p_values[j]) > 65536 then
      perform ${schema}.kv_value(p_values[j]);
    end if;
    if coalesce(p_forever[j], false) = (p_ttl_ms[j] is not null) or p_ttl_ms[j] <= 0 then
      perform ${schema}.kv_expiry(p_ttl_ms[j], p_forever[j]);
    end if;
    if not coalesce(p_forever[j], false) then
      v_exp[j] := now() + p_ttl_ms[j] * interval '1 millisecond';
    end if;
    v_last := j;
  end loop;

  if n > 1 and v_last > 0
     and (select count(distinct (x.ns, x.k)) from unnest(p_ns, p_keys) as x(ns, k)) < n then
    raise exception 'kv: a bundle may touch a key at most once' using errcode = '22023';
  end if;
  v_made := array_fill(false, array[greatest(n, 1)]);
  v_made_val := array_fill(null::text, array[greatest(n, 1)]);
  v_made_ver := array_fill(null::bigint, array[greatest(n, 1)]);
  if v_last > 0 then
    select jsonb_object_agg(x.ns || ' ' || x.k, x.i) into v_ord
      from unnest(p_ns, p_keys) with ordinality as x(ns, k, i)
     where x.i <= v_last;
    with made as (
      insert into ${schema}.kv as k (namespace, key, value, version, expires_at)
      select x.ns, x.k, x.v::jsonb, nextval('${schema}.kv_versions'), x.e
        from unnest(p_ns, p_keys, p_values, v_exp) with ordinality as x(ns, k, v, e, i)
       where x.i <= v_last
       order by x.i
      on conflict (namespace, key) do nothing
      returning k.namespace, k.key, k.value, k.version)
    select coalesce(array_agg((v_ord ->> (made.namespace || ' ' || made.key))::int), '{}'),
           coalesce(array_agg(made.value::text), '{}'), coalesce(array_agg(made.version), '{}')
      into v_made_at, v_made_vals, v_made_vers
      from made;
    for j in 1 .. cardinality(v_made_at) loop
      v_made[v_made_at[j]] := true;
      v_made_val[v_made_at[j]] := v_made_vals[j];
      v_made_ver[v_made_at[j]] := v_made_vers[j];
    end loop;
  end if;

  for j in 1 .. n loop
    op_index := j;
    if v_made[j] then
      w_applied := true;
      w_reason := null;
      w_found := true;
      w_value := v_made_val[j];
      w_version := v_made_ver[j];
      w_expires_at := v_exp[j];
    else
      if p_ops[j] = 'PUT' then
        r := ${schema}.kv_put(p_ns[j], p_keys[j], p_values[j], p_ttl_ms[j], p_forever[j], p_expect[j]);
      elsif p_ops[j] = 'PUT_IF_ABSENT' then
        r := ${schema}.kv_put(p_ns[j], p_keys[j], p_values[j], p_ttl_ms[j], p_forever[j], 0);
      elsif p_ops[j] = 'INCR' then
        r := ${schema}.kv_incr(p_ns[j], p_keys[j], p_delta[j], p_ttl_ms[j], p_forever[j], p_max[j]);
      elsif p_ops[j] = 'DELETE' then
        r := ${schema}.kv_delete(p_ns[j], p_keys[j], p_expect[j]);
      else
        raise exception 'kv: unknown write %', p_ops[j] using errcode = '22023';
      end if;
      w_applied := r.applied;
      w_reason := r.reason;
      w_found := r.found;
      w_value := r.value::text;
      w_version := r.version;
      w_expires_at := r.expires_at;
    end if;
    return next;
    exit when p_required[j] and not w_applied;
  end loop;
end $fn$;
