-- Idempotency markers (once() = put-if-absent) at the cost of an insert.
--
-- A consumer that makes its effect idempotent writes one marker per message in the bundle that acks
-- the batch. Up to V3 each marker went through kv_put: a PL/pgSQL frame, three checking functions, a
-- locking probe and a one-row insert, several times the server time of the insert itself. This file:
--   1. makes kv_check's namespace test cheap (every KV write runs it);
--   2. lets kv_write_many create a bundle's put-if-absent writes with one multi-row insert;
--   3. adds the guard of the marker fast path (KvStore.markersThenAck), which sends the idempotent
--      consumer's bundle as one plain statement and falls back to bundle_kv_ack when it cannot apply.

-- kv_check as in V2, with the namespace test written as "a length of 1..128 and no character outside
-- the set": the same rule, but the anchored pattern with a bounded repeat ('^[...]{1,128}$') cost about
-- 15 microseconds per evaluation in PostgreSQL's regex engine, on every KV write; this form ~0.5.
create or replace function ${schema}.kv_check(p_ns text, p_key text) returns void
language plpgsql immutable as $fn$
begin
  if p_ns is null or octet_length(p_ns) < 1 or octet_length(p_ns) > 128 or p_ns ~ '[^A-Za-z0-9._:-]' then
    raise exception 'kv: namespace % is invalid: allowed is [A-Za-z0-9._:-]{1,128}',
      coalesce(quote_literal(left(p_ns, 64)), 'null') using errcode = '22023';
  end if;
  if p_key is null or octet_length(p_key) < 1 or octet_length(p_key) > 512 then
    raise exception 'kv: key must be 1..512 bytes, was % bytes', coalesce(octet_length(p_key), 0)
      using errcode = '22023';
  end if;
end $fn$;

-- kv_write_many as in V3, with the leading run of put-if-absent writes (a bundle's markers) first
-- tried together as one multi-row insert. Why that is the same as running them one by one, in order:
-- a bundle touches each key at most once (the client refuses a second touch before sending; this
-- function refuses it too), so the writes' outcomes do not depend on each other; and the insert takes
-- the new keys in the bundle's order, before any later write of the bundle, so two bundles still meet
-- their keys in the order they were written (only the leading run: taking a put-if-absent ahead of an
-- earlier put of another key could lock two keys in the opposite order of a concurrent bundle and
-- deadlock). A put-if-absent whose key has no row simply creates it, which is what the insert does;
-- "on conflict do nothing" leaves every key that has a row (live, expired, or created by a concurrent
-- transaction, which the insert waits for) to kv_put, exactly as before, which decides between
-- 'exists' and winning over an expired row. Results still come back in order and stop at the
-- first required write that did not apply; markers inserted for later writes are undone with the
-- bundle, which does not apply then (the caller rolls back, or bundle_kv_ack's block is undone). The
-- argument checks are those of kv_check, kv_value and kv_expiry, evaluated inline; when one fails, the
-- checking function itself is called so the error text stays the same.
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
  v_bulk int[] := '{}';                       -- ordinals of the leading put-if-absent writes
  v_exp timestamptz[];                        -- their expiry, by ordinal
  v_made int[] := '{}';                       -- ordinals the insert created
  v_made_val text[] := '{}';                  -- and the stored value, as text
  v_at int;
begin
  v_exp := array_fill(null::timestamptz, array[greatest(n, 1)]);
  for j in 1 .. n loop
    exit when p_ops[j] <> 'PUT_IF_ABSENT'; -- the leading run only: see above
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
    v_bulk := v_bulk || j;
  end loop;

  if n > 1 and cardinality(v_bulk) > 0
     and (select count(distinct (p_ns[i], p_keys[i])) from generate_subscripts(p_ops, 1) as g(i)) < n then
    raise exception 'kv: a bundle may touch a key at most once' using errcode = '22023';
  end if;
  if cardinality(v_bulk) > 0 then
    with made as (
      insert into ${schema}.kv as k (namespace, key, value, version, expires_at)
      select p_ns[b.i], p_keys[b.i], p_values[b.i]::jsonb, 1, v_exp[b.i]
        from unnest(v_bulk) as b(i)
       order by b.i
      on conflict (namespace, key) do nothing
      returning k.namespace, k.key, k.value)
    select coalesce(array_agg(b.i), '{}'), coalesce(array_agg(made.value::text), '{}')
      into v_made, v_made_val
      from made join unnest(v_bulk) as b(i) on made.namespace = p_ns[b.i] and made.key = p_keys[b.i];
  end if;

  for j in 1 .. n loop
    v_at := array_position(v_made, j);
    op_index := j;
    if v_at is not null then
      w_applied := true;
      w_reason := null;
      w_found := true;
      w_value := v_made_val[v_at];
      w_version := 1;
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

-- The marker fast path of a bundle (KvStore.markersThenAck): the idempotent consumer's bundle, only
-- put-if-absent writes then acks under leases, sent as ONE plain statement, no PL/pgSQL for the KV
-- part: a multi-row insert of the markers in a data-modifying WITH, and the ack call. It either
-- applies whole or fails whole, with an error, and the client then runs the bundle through
-- bundle_kv_ack, which reports exactly why:
--   * a key that has any row (live, expired, or committed by a concurrent bundle while we waited on
--     it) fails the insert with unique_violation (23505) on the kv primary key;
--   * an ack whose lease is lost calls this function, which raises QB002.
-- A plain insert rather than "on conflict do nothing": no speculative insertion (about half again the
-- CPU of an insert, and a confirmation record in the WAL per row), and the conflict case is the rare
-- one (a redelivered message whose marker exists).
create function ${schema}.bundle_lease_lost() returns boolean
language plpgsql volatile as $fn$
begin
  raise exception 'bundle: a lease was lost' using errcode = 'QB002';
end $fn$;
