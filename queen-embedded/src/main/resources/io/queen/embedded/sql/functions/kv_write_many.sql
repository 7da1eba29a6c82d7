-- The KV writes of a transaction bundle, in order, in one call: each op (PUT, PUT_IF_ABSENT, INCR, DELETE) as the
-- single-key function does it, one result row per op. The leading run of PUT_IF_ABSENT (a bundle's once() markers)
-- goes in one insert. Stops at the first write that does not apply when it is required.

create or replace function ${schema}.kv_write_many(p_ops text[], p_ns text[], p_keys text[], p_values text[],
                                                   p_delta bigint[], p_ttl_ms bigint[], p_forever boolean[],
                                                   p_expect bigint[], p_max bigint[], p_required boolean[])
returns table(op_index integer, w_applied boolean, w_reason text, w_found boolean, w_value text, w_version bigint,
              w_expires_at timestamp with time zone)
language plpgsql
set enable_seqscan = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
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
    exit when p_ops[j] <> 'PUT_IF_ABSENT'; -- the leading run only: once() markers come first
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
end $$;
