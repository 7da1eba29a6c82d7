-- Queen KV: a key/value store in the same database as the log, so a write can share a transaction
-- with a push and an ack. ${schema} is replaced by the quoted schema name.
--
-- The rules live here, not in the clients, so every caller gets them identically:
--   * every write carries exactly one of a TTL above zero or forever (expires_at null);
--   * an expired row never counts as existing, even before the sweeper removes it: the truth is the
--     predicate "expires_at is null or expires_at > now()", not the presence of the row;
--   * a put does not inherit the previous expiry; incr's expiry applies only when it creates the key;
--   * a conditional write that matches nothing creates nothing;
--   * every write answers with the key's current state (found, value, version, expires_at) even when
--     it did not apply; the reasons are closed: exists, absent, version, limit, type;
--   * namespace [A-Za-z0-9._:-]{1,128}, key 1..512 bytes, value at most 64 KiB of JSON text.
-- Time is the database clock (now(): the transaction's start), never a client's.
--
-- Versions: 1 when a key is created (also over an expired row still physically there), +1 on every
-- write of a live key. Locking: each write locks the key's row (select ... for update); creation
-- races are settled by insert ... on conflict do nothing and a retry of the lock.

create table ${schema}.kv (
  namespace  text collate "C" not null,
  key        text collate "C" not null,
  value      jsonb not null,            -- a stored JSON null is 'null'::jsonb, never SQL NULL
  version    bigint not null,
  expires_at timestamptz,               -- null = forever
  primary key (namespace, key)
);

-- The sweeper's index: only rows that can expire.
create index kv_expires_at on ${schema}.kv (expires_at) where expires_at is not null;

-- The answer of every write.
create type ${schema}.kv_result as (
  applied    boolean,
  reason     text,        -- null when applied; else exists | absent | version | limit | type
  found      boolean,     -- whether a live key exists now (after the write)
  value      jsonb,       -- its value, or null when not found
  version    bigint,      -- its version, or 0 when not found
  expires_at timestamptz  -- its expiry, or null (forever, or not found)
);

-- ---------------------------------------------------------------------------------------------
-- Argument checks. Errors are SQLSTATE 22023 (invalid_parameter_value).
create function ${schema}.kv_check(p_ns text, p_key text) returns void
language plpgsql immutable as $fn$
begin
  if p_ns is null or p_ns !~ '^[A-Za-z0-9._:-]{1,128}$' then
    raise exception 'kv: namespace % is invalid: allowed is [A-Za-z0-9._:-]{1,128}',
      coalesce(quote_literal(left(p_ns, 64)), 'null') using errcode = '22023';
  end if;
  if p_key is null or octet_length(p_key) < 1 or octet_length(p_key) > 512 then
    raise exception 'kv: key must be 1..512 bytes, was % bytes', coalesce(octet_length(p_key), 0)
      using errcode = '22023';
  end if;
end $fn$;

-- The value as jsonb, after checking its size as sent (JSON text, UTF-8): at most 64 KiB.
create function ${schema}.kv_value(p_value text) returns jsonb
language plpgsql immutable as $fn$
begin
  if p_value is null then
    raise exception 'kv: value is missing (a JSON null is the text ''null'')' using errcode = '22023';
  end if;
  if octet_length(p_value) > 65536 then
    raise exception 'kv: value is % bytes; the limit is 65536 (64 KiB)', octet_length(p_value)
      using errcode = '22023';
  end if;
  return p_value::jsonb;
end $fn$;

-- The expiry of a write: exactly one of a ttl above zero (milliseconds) or forever.
create function ${schema}.kv_expiry(p_ttl_ms bigint, p_forever boolean) returns timestamptz
language plpgsql stable as $fn$
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
end $fn$;

-- ---------------------------------------------------------------------------------------------
-- put: writes the value with a new expiry (never the old one).
--   p_expect null: unconditional.
--   p_expect 0:    only if no live key exists (else 'exists').
--   p_expect v>0:  only if the live key has version v ('version' if another, 'absent' if none;
--                  nothing is created).
create function ${schema}.kv_put(p_ns text, p_key text, p_value text, p_ttl_ms bigint, p_forever boolean,
                                 p_expect bigint default null)
returns ${schema}.kv_result
language plpgsql volatile as $fn$
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
         set value = v_value, version = case when v_live then r.version + 1 else 1 end, expires_at = v_exp
       where k.namespace = p_ns and k.key = p_key
      returning true, null::text, true, k.value, k.version, k.expires_at into v_out;
      return v_out;
    end if;
    if p_expect > 0 then
      return row(false, 'absent', false, null, 0, null)::${schema}.kv_result;
    end if;
    insert into ${schema}.kv as k (namespace, key, value, version, expires_at)
    values (p_ns, p_key, v_value, 1, v_exp)
    on conflict (namespace, key) do nothing;
    if found then
      return row(true, null, true, v_value, 1, v_exp)::${schema}.kv_result;
    end if;
    -- a concurrent transaction created the key between our lock attempt and our insert: lock it
    v_tries := v_tries + 1;
    if v_tries >= 20 then
      raise exception 'kv: could not settle a concurrent write of one key' using errcode = '40001';
    end if;
  end loop;
end $fn$;

-- putIfAbsent (once): writes only when no live key exists; 'exists' otherwise. An expired row does
-- not count: the write wins against it.
create function ${schema}.kv_put_if_absent(p_ns text, p_key text, p_value text, p_ttl_ms bigint,
                                           p_forever boolean)
returns ${schema}.kv_result
language sql volatile as $fn$
  select * from ${schema}.kv_put(p_ns, p_key, p_value, p_ttl_ms, p_forever, 0)
$fn$;

-- incr: adds p_delta to an integer value; an absent or expired key counts as 0 and is created with
-- the given expiry; a live key keeps the expiry it was born with (create-only TTL).
--   'type':  the live value is not an integral number, or the result does not fit in int64;
--   'limit': p_max is given and the result would exceed it. Nothing is written, nothing saturates.
create function ${schema}.kv_incr(p_ns text, p_key text, p_delta bigint, p_ttl_ms bigint, p_forever boolean,
                                  p_max bigint default null)
returns ${schema}.kv_result
language plpgsql volatile as $fn$
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
         set value = to_jsonb(v_new::bigint), version = r.version + 1
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
         set value = to_jsonb(p_delta), version = 1, expires_at = v_exp
       where k.namespace = p_ns and k.key = p_key
      returning true, null::text, true, k.value, k.version, k.expires_at into v_out;
      return v_out;
    end if;
    insert into ${schema}.kv as k (namespace, key, value, version, expires_at)
    values (p_ns, p_key, to_jsonb(p_delta), 1, v_exp)
    on conflict (namespace, key) do nothing;
    if found then
      return row(true, null, true, to_jsonb(p_delta), 1, v_exp)::${schema}.kv_result;
    end if;
    v_tries := v_tries + 1;
    if v_tries >= 20 then
      raise exception 'kv: could not settle a concurrent write of one key' using errcode = '40001';
    end if;
  end loop;
end $fn$;

-- delete: removes a live key ('absent' when there is none); with p_expect, only if its version is
-- p_expect ('version' otherwise). Applied: found = false afterwards.
create function ${schema}.kv_delete(p_ns text, p_key text, p_expect bigint default null)
returns ${schema}.kv_result
language plpgsql volatile as $fn$
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
end $fn$;

-- Removes up to p_batch expired rows, skipping rows a writer holds; returns how many it removed.
-- Callers run it in small transactions, one node at a time (see KvSweeper).
create function ${schema}.kv_sweep(p_batch int) returns int
language plpgsql volatile as $fn$
declare
  v int;
begin
  delete from ${schema}.kv k
   where k.ctid in (select e.ctid from ${schema}.kv e
                     where e.expires_at is not null and e.expires_at <= now()
                     limit greatest(p_batch, 1)
                       for update skip locked)
     and k.expires_at <= now();
  get diagnostics v = row_count;
  return v;
end $fn$;
