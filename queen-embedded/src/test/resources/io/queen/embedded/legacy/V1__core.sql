-- Queen core: queues, partitions, the message log, consumer groups, cursors with leases, dead letters.
-- ${schema} is replaced by the quoted schema name; ${schema_literal} by the schema name as a SQL string.
--
-- The log: messages(partition_id, offset) with per-partition gapless offsets handed out under the
-- partition's row lock, so offsets become visible in commit order and a cursor never jumps over a
-- message that was not committed yet.
--
-- Lock order, everywhere: queue size advisory locks (by queue id), then partition rows (by id), then
-- cursor rows. The one exception is ack/pop, which lock a cursor and then take a SHARE lock on its
-- partition only to clear has_pending; that cannot deadlock with push because push only locks cursor
-- rows whose has_pending is false, and a cursor being acked or popped has it true.

create table ${schema}.queues (
  id                    bigint generated always as identity primary key,
  name                  text not null unique,
  lease_time_ms         bigint not null default 30000,
  retry_limit           int not null default 3,
  retry_delay_ms        bigint not null default 0,
  dead_letter           boolean not null default true,
  delayed_processing_ms bigint not null default 0,
  window_buffer_ms      bigint not null default 0,
  max_size              bigint not null default 0,
  created_at            timestamptz not null default now()
);

create table ${schema}.partitions (
  id              bigint generated always as identity primary key,
  queue_id        bigint not null references ${schema}.queues(id) on delete cascade,
  name            text not null,
  next_offset     bigint not null default 0,
  first_offset    bigint not null default 0,
  last_message_at timestamptz,
  created_at      timestamptz not null default now(),
  unique (queue_id, name)
) with (fillfactor = 50); -- every push updates its partition rows: room on the page keeps those updates HOT

create table ${schema}.messages (
  partition_id   bigint not null,
  "offset"       bigint not null,
  id             uuid not null,
  transaction_id text,
  trace_id       text,
  payload        jsonb not null,
  created_at     timestamptz not null default now(),
  primary key (partition_id, "offset")
);
create unique index messages_transaction_id on ${schema}.messages (partition_id, transaction_id)
  where transaction_id is not null;

create table ${schema}.consumer_groups (
  queue_id   bigint not null references ${schema}.queues(id) on delete cascade,
  name       text not null,
  mode       text not null check (mode in ('ALL', 'NEW', 'FROM')),
  start_at   timestamptz,
  created_at timestamptz not null default now(),
  primary key (queue_id, name)
);

-- One row per (partition, group): everything <= committed_offset is done for the group.
-- has_pending: the partition may hold something for the group (messages after the cursor or a
-- redelivery). Set by push (only when false), cleared by ack/pop under a SHARE lock on the partition.
create table ${schema}.cursors (
  partition_id     bigint not null references ${schema}.partitions(id) on delete cascade,
  group_name       text not null,
  queue_id         bigint not null,
  committed_offset bigint not null default -1,
  has_pending      boolean not null default false,
  picked_at        timestamptz not null default '-infinity',
  lease_id         uuid,
  lease_owner      text,
  lease_expires_at timestamptz,
  lease_ms         bigint,
  lease_from       bigint,
  lease_to         bigint,
  lease_redrive    bigint,
  acked_ahead      bigint[],
  attempts         int not null default 0,
  last_error       text,
  retry_at         timestamptz,
  primary key (partition_id, group_name)
) with (fillfactor = 70); -- acks update cursor rows in place (HOT) when the page has room
create index cursors_ready on ${schema}.cursors (queue_id, group_name, picked_at) where has_pending;
create index cursors_group on ${schema}.cursors (queue_id, group_name);

create table ${schema}.dead_letters (
  id           bigint generated always as identity primary key,
  queue_id     bigint not null references ${schema}.queues(id) on delete cascade,
  partition_id bigint not null,
  "offset"     bigint not null,
  group_name   text not null,
  message_id   uuid not null,
  error        text,
  attempts     int not null,
  failed_at    timestamptz not null default now()
);
create index dead_letters_group on ${schema}.dead_letters (queue_id, group_name, id);

-- A dead letter put back on its partition for one group: delivered to that group before the
-- partition's next message.
create table ${schema}.redeliveries (
  partition_id bigint not null references ${schema}.partitions(id) on delete cascade,
  group_name   text not null,
  "offset"     bigint not null,
  attempts     int not null default 0,
  retry_at     timestamptz,
  primary key (partition_id, group_name, "offset")
);

-- ---------------------------------------------------------------------------------------------
-- Clears or sets has_pending of one cursor from the truth, under a SHARE lock on the partition. When
-- a push holds the partition right now, the flag is left set (that push will commit a message, or, if
-- it rolls back, the next pop finds nothing and clears the flag then): this never waits for a pusher,
-- so a long application transaction that pushed cannot stall consumers of the partition.
create function ${schema}.refresh_pending(p_pid bigint, p_group text) returns boolean
language plpgsql as $$
declare
  v_next bigint;
  v_pending boolean;
begin
  select next_offset into v_next from ${schema}.partitions where id = p_pid for share skip locked;
  if not found then
    return true;
  end if;
  select c.committed_offset < v_next - 1
         or exists (select 1 from ${schema}.redeliveries r where r.partition_id = p_pid and r.group_name = p_group)
    into v_pending
    from ${schema}.cursors c where c.partition_id = p_pid and c.group_name = p_group;
  update ${schema}.cursors set has_pending = v_pending
   where partition_id = p_pid and group_name = p_group and has_pending is distinct from v_pending;
  return v_pending;
end $$;

-- Records a dead letter (when the queue keeps them).
create function ${schema}.dead_letter(p_qid bigint, p_keep boolean, p_pid bigint, p_offset bigint, p_group text,
                                      p_error text, p_attempts int) returns void
language plpgsql as $$
begin
  if p_keep then
    insert into ${schema}.dead_letters(queue_id, partition_id, "offset", group_name, message_id, error, attempts)
    select p_qid, p_pid, p_offset, p_group, m.id, p_error, p_attempts
      from ${schema}.messages m where m.partition_id = p_pid and m."offset" = p_offset;
  end if;
end $$;

-- Creates a consumer group and its cursors. Locks the queue row FOR UPDATE: a push that creates a
-- partition holds a KEY SHARE lock on it (foreign key), so partitions created concurrently are either
-- seen here or see the group when they create their cursors. Partitions are SHARE-locked so that
-- pushes in flight commit before the start offsets are read.
create function ${schema}.ensure_group(p_qid bigint, p_group text, p_mode text, p_from timestamptz) returns void
language plpgsql as $$
begin
  if exists (select 1 from ${schema}.consumer_groups where queue_id = p_qid and name = p_group) then
    return;
  end if;
  perform 1 from ${schema}.queues where id = p_qid for update;
  insert into ${schema}.consumer_groups(queue_id, name, mode, start_at)
  values (p_qid, p_group, p_mode, p_from) on conflict do nothing;
  if not found then
    return;
  end if;
  perform 1 from ${schema}.partitions where queue_id = p_qid order by id for share;
  insert into ${schema}.cursors(partition_id, group_name, queue_id, committed_offset, has_pending)
  select p.id, p_group, p_qid, s.c, s.c < p.next_offset - 1
    from ${schema}.partitions p
    cross join lateral (
      select case p_mode
               when 'ALL' then p.first_offset - 1
               when 'NEW' then p.next_offset - 1
               else coalesce((select max(m."offset") from ${schema}.messages m
                               where m.partition_id = p.id and m.created_at < p_from), p.first_offset - 1)
             end as c) s
   where p.queue_id = p_qid
  on conflict do nothing;
end $$;

create function ${schema}.ensure_queue(p_name text) returns bigint
language plpgsql as $$
declare
  v bigint;
begin
  select id into v from ${schema}.queues where name = p_name;
  if v is null then
    insert into ${schema}.queues(name) values (p_name) on conflict (name) do nothing returning id into v;
    if v is null then
      select id into v from ${schema}.queues where name = p_name;
    end if;
  end if;
  return v;
end $$;

-- ---------------------------------------------------------------------------------------------
-- push: one transaction for a batch over any queues and partitions. Per item: 'queued' with its new
-- offset, or 'duplicate' (same transaction id already in the partition, or earlier in the batch)
-- with the existing message's id and offset. With p_notify, NOTIFYs once per queue (delivered on
-- commit). Queen's own pushes pass false and notify from a per-node notifier after the commit: a
-- transaction that issued NOTIFY takes a database-wide lock at commit, which serialises every such
-- commit (and its WAL flush) and cut push throughput about five-fold.
create function ${schema}.push(p_queues text[], p_partitions text[], p_payloads jsonb[], p_txn_ids text[],
                               p_trace_ids text[], p_notify boolean default true)
returns table(idx int, status text, message_id uuid, partition_id bigint, msg_offset bigint)
language plpgsql as $$
declare
  n int := coalesce(cardinality(p_payloads), 0);
  v_pids bigint[];
  v_qids bigint[];
  v_status text[];
  v_off bigint[];
  v_ids uuid[];
  v_new bigint[];
  v_all boolean;
  v_bounded boolean;
  v_has_txn boolean;
  v_lock_ids bigint[];
  v_lock_next bigint[];
  r record;
  v_size bigint;
  v_add bigint;
begin
  if n = 0 then
    raise exception 'push: the batch is empty' using errcode = '22023';
  end if;
  if cardinality(p_queues) <> n or cardinality(p_partitions) <> n or cardinality(p_txn_ids) <> n
     or cardinality(p_trace_ids) <> n then
    raise exception 'push: argument arrays differ in length' using errcode = '22023';
  end if;

  -- the fast path: every queue and partition exists already (one statement)
  -- (lateral probes so each item is one lookup on (queue_id, name) whatever the statistics say)
  select array_agg(pp.id order by x.i), array_agg(q.id order by x.i), bool_and(pp.id is not null),
         coalesce(bool_or(q.max_size > 0), false)
    into v_pids, v_qids, v_all, v_bounded
    from unnest(p_queues, p_partitions) with ordinality as x(qn, p, i)
    left join lateral (select qq.id, qq.max_size from ${schema}.queues qq where qq.name = x.qn offset 0) q on true
    left join lateral (select pp0.id from ${schema}.partitions pp0
                        where pp0.queue_id = q.id and pp0.name = x.p offset 0) pp on true;

  if not v_all then
    -- queues and partitions, created on first push
    insert into ${schema}.queues(name)
    select distinct x.qn from unnest(p_queues) as x(qn)
     where not exists (select 1 from ${schema}.queues q where q.name = x.qn)
    on conflict (name) do nothing;

    with pairs as (
      select distinct q.id as qid, x.p
        from unnest(p_queues, p_partitions) as x(qn, p)
        join lateral (select qq.id from ${schema}.queues qq where qq.name = x.qn offset 0) q on true),
    ins as (
      insert into ${schema}.partitions(queue_id, name)
      select pairs.qid, pairs.p from pairs
       where not exists (select 1 from ${schema}.partitions pp where pp.queue_id = pairs.qid and pp.name = pairs.p offset 0)
      on conflict (queue_id, name) do nothing
      returning id)
    select array_agg(id) into v_new from ins;

    if v_new is not null then
      -- a new statement, so groups committed while we waited on the queue row are visible
      insert into ${schema}.cursors(partition_id, group_name, queue_id, committed_offset, has_pending)
      select pp.id, g.name, pp.queue_id, -1, false
        from ${schema}.partitions pp
        join ${schema}.consumer_groups g on g.queue_id = pp.queue_id
       where pp.id = any(v_new)
      on conflict do nothing;
    end if;

    select array_agg(pp.id order by x.i), array_agg(q.id order by x.i), coalesce(bool_or(q.max_size > 0), false)
      into v_pids, v_qids, v_bounded
      from unnest(p_queues, p_partitions) with ordinality as x(qn, p, i)
      join lateral (select qq.id, qq.max_size from ${schema}.queues qq where qq.name = x.qn offset 0) q on true
      join lateral (select pp0.id from ${schema}.partitions pp0
                     where pp0.queue_id = q.id and pp0.name = x.p offset 0) pp on true;
  end if;

  -- bounded queues: one pusher at a time per queue, so the size check is exact
  if v_bounded then
    for r in select q.id from ${schema}.queues q where q.id = any(v_qids) and q.max_size > 0 order by q.id loop
      perform pg_advisory_xact_lock(5860506237810458624 + r.id);
    end loop;
  end if;

  -- partition rows in a fixed order: offsets are taken under these locks
  select array_agg(l.id), array_agg(l.next_offset) into v_lock_ids, v_lock_next
    from (select pp.id, pp.next_offset from ${schema}.partitions pp
           where pp.id = any(v_pids) order by pp.id for no key update) l;

  v_status := array_fill('queued'::text, array[n]);
  v_off := array_fill(null::bigint, array[n]);
  v_ids := array_fill(null::uuid, array[n]);

  -- de-duplication by transaction id: against the stored log (one probe per item through the partial
  -- unique index), then within the batch
  v_has_txn := array_position(p_txn_ids, null) is null or exists (select 1 from unnest(p_txn_ids) as t(v) where t.v is not null);
  if v_has_txn then
    for r in select x.i, m.id, m."offset"
               from unnest(v_pids, p_txn_ids) with ordinality as x(pid, t, i)
               cross join lateral (
                 select mm.id, mm."offset" from ${schema}.messages mm
                  where mm.partition_id = x.pid and mm.transaction_id = x.t and mm.transaction_id is not null) m
              where x.t is not null loop
      v_status[r.i] := 'duplicate';
      v_ids[r.i] := r.id;
      v_off[r.i] := r."offset";
    end loop;
    for r in select s.i from (
               select x.i, x.st, min(x.i) over (partition by x.pid, x.t) as first_i
                 from unnest(v_pids, p_txn_ids, v_status) with ordinality as x(pid, t, st, i)
                where x.t is not null) s
              where s.i <> s.first_i and s.st = 'queued' loop
      v_status[r.i] := 'dup-in-batch';
    end loop;
  end if;

  -- size limits
  if v_bounded then
    for r in select q.id, q.name, q.max_size from ${schema}.queues q
              where q.id = any(v_qids) and q.max_size > 0 order by q.id loop
      select coalesce(sum(pp.next_offset - pp.first_offset), 0) into v_size
        from ${schema}.partitions pp where pp.queue_id = r.id;
      select count(*) into v_add from unnest(v_qids, v_status) as x(qid, st) where x.qid = r.id and x.st = 'queued';
      if v_size + v_add > r.max_size then
        raise exception 'queue % is full: % stored + % pushed > maxSize %', r.name, v_size, v_add, r.max_size
          using errcode = 'QU001', detail = r.name, hint = r.max_size::text;
      end if;
    end loop;
  end if;

  -- offsets (consecutive per partition, in request order) and ids, in one statement
  select array_agg(case when s.st = 'queued' then s.o else s.prev_off end order by s.i),
         array_agg(case when s.st = 'queued' then gen_random_uuid() else s.prev_id end order by s.i)
    into v_off, v_ids
    from (select x.i, x.st, x.prev_off, x.prev_id,
                 l.next_offset + row_number() over (partition by x.pid, x.st = 'queued' order by x.i) - 1 as o
            from unnest(v_pids, v_status, v_off, v_ids) with ordinality as x(pid, st, prev_off, prev_id, i)
            join unnest(v_lock_ids, v_lock_next) as l(id, next_offset) on l.id = x.pid) s;

  if v_has_txn then
    for r in select s.i, s.first_i from (
               select x.i, x.st, min(x.i) over (partition by x.pid, x.t) as first_i
                 from unnest(v_pids, p_txn_ids, v_status) with ordinality as x(pid, t, st, i)
                where x.t is not null) s
              where s.st = 'dup-in-batch' loop
      v_status[r.i] := 'duplicate';
      v_ids[r.i] := v_ids[r.first_i];
      v_off[r.i] := v_off[r.first_i];
    end loop;
  end if;

  insert into ${schema}.messages(partition_id, "offset", id, transaction_id, trace_id, payload)
  select x.pid, x.o, x.id, x.t, x.tr, x.pl
    from unnest(v_pids, v_off, v_ids, p_txn_ids, p_trace_ids, p_payloads, v_status) as x(pid, o, id, t, tr, pl, st)
   where x.st = 'queued';

  update ${schema}.partitions pp
     set next_offset = s.mx + 1, last_message_at = now()
    from (select x.pid, max(x.o) as mx
            from unnest(v_pids, v_off, v_status) as x(pid, o, st)
           where x.st = 'queued' group by x.pid) s
   where pp.id = s.pid and s.mx + 1 > pp.next_offset;

  -- setting the flag is always safe; it costs a write only when it was clear
  update ${schema}.cursors c set has_pending = true
   where c.partition_id = any(v_pids) and not c.has_pending;

  if p_notify then
    for r in select distinct x.qn from unnest(p_queues, v_status) as x(qn, st) where x.st = 'queued' loop
      perform pg_notify(${schema_literal} || '.wake', r.qn);
    end loop;
  end if;

  return query select g.i::int, v_status[g.i], v_ids[g.i], v_pids[g.i], v_off[g.i]
                 from generate_subscripts(v_status, 1) as g(i) order by g.i;
end $$;

-- push_fast: the common push in four statements, for a batch whose queues and partitions all exist,
-- whose queues are unbounded, and whose items carry no transaction id. The caller groups the items by
-- (queue, partition) ("pairs"), numbers them within their pair (item_rank, from 0, in request order),
-- and makes their ids; offsets are then the pair's next_offset + rank, so no per-item work is left
-- in SQL. Returns one row per pair with the pair's first offset, or no row at all (and changes nothing)
-- when the batch needs the full push: then the caller calls push().
-- It must stay PL/pgSQL, one statement after another: the has_pending update needs a snapshot taken
-- after the partition locks. As one statement with CTEs, its snapshot predates the locks, so it can
-- miss a flag that an ack cleared just before the push locked the partition, and the message is then
-- stranded until the next push (the ordering suite caught exactly that).
create function ${schema}.push_fast(p_pair_queues text[], p_pair_partitions text[], p_item_pair int[],
                                    p_item_rank int[], p_ids uuid[], p_payloads jsonb[], p_trace_ids text[])
returns table(pair int, partition_id bigint, first_offset bigint)
language plpgsql as $$
declare
  v_pids bigint[];
  v_all boolean;
  v_bounded boolean;
  v_lock_ids bigint[];
  v_lock_next bigint[];
  v_next bigint[];
  k int;
  m int := cardinality(p_pair_queues);
begin
  select array_agg(pp.id order by x.k), bool_and(pp.id is not null), coalesce(bool_or(q.max_size > 0), false)
    into v_pids, v_all, v_bounded
    from unnest(p_pair_queues, p_pair_partitions) with ordinality as x(qn, p, k)
    left join lateral (select qq.id, qq.max_size from ${schema}.queues qq where qq.name = x.qn offset 0) q on true
    left join lateral (select pp0.id from ${schema}.partitions pp0
                        where pp0.queue_id = q.id and pp0.name = x.p offset 0) pp on true;
  if not v_all or v_bounded then
    return;
  end if;

  -- partition rows in a fixed order: offsets are taken under these locks
  select array_agg(l.id), array_agg(l.next_offset) into v_lock_ids, v_lock_next
    from (select pp.id, pp.next_offset from ${schema}.partitions pp
           where pp.id = any(v_pids) order by pp.id for no key update) l;
  v_next := array_fill(0::bigint, array[m]);
  for k in 1 .. m loop
    v_next[k] := v_lock_next[array_position(v_lock_ids, v_pids[k])];
  end loop;

  insert into ${schema}.messages(partition_id, "offset", id, trace_id, payload)
  select v_pids[x.pk], v_next[x.pk] + x.rk, x.id, x.tr, x.pl
    from unnest(p_item_pair, p_item_rank, p_ids, p_trace_ids, p_payloads) as x(pk, rk, id, tr, pl);

  update ${schema}.partitions pp
     set next_offset = s.nxt + s.cnt, last_message_at = now()
    from (select v_pids[c.pk] as pid, v_next[c.pk] as nxt, count(*) as cnt
            from unnest(p_item_pair) as c(pk) group by c.pk) s
   where pp.id = s.pid;

  update ${schema}.cursors c set has_pending = true
   where c.partition_id = any(v_pids) and not c.has_pending;

  return query select g.k::int, v_pids[g.k], v_next[g.k] from generate_subscripts(v_pids, 1) as g(k);
end $$;

-- ---------------------------------------------------------------------------------------------
-- pop: leases up to p_max_partitions partitions of the group that have something to deliver and no
-- live lease, and returns up to p_batch messages over them, in offset order per partition.
-- An expired lease counts as a failed attempt of the partition's head message; a head that has failed
-- before is delivered alone, so one poison message cannot take innocent ones with it.
create function ${schema}.pop(p_queue text, p_group text, p_batch int, p_max_partitions int, p_partition text,
                              p_lease_ms bigint, p_owner text, p_mode text, p_from timestamptz,
                              p_auto_ack boolean)
returns table(partition_name text, partition_id bigint, msg_offset bigint, message_id uuid, transaction_id text,
              trace_id text, payload jsonb, created_at timestamptz, lease_id uuid, attempt int)
language plpgsql as $$
declare
  q ${schema}.queues;
  c record;
  rd record;
  v_qid bigint;
  v_remaining int := p_batch;
  v_lease_ms bigint;
  v_attempts int;
  v_committed bigint;
  v_hi bigint;
  v_limit int;
  v_lease uuid;
  v_delay_cut bigint;
begin
  if not p_auto_ack then
    -- a lease lost in a database crash only makes its messages deliverable again sooner, so the pop
    -- need not wait for its WAL flush (an auto-ack pop moves the cursor, which must be durable)
    perform set_config('synchronous_commit', 'off', true);
  end if;
  v_qid := ${schema}.ensure_queue(p_queue);
  select * into q from ${schema}.queues where id = v_qid;
  perform ${schema}.ensure_group(v_qid, p_group, p_mode, p_from);
  v_lease_ms := coalesce(p_lease_ms, q.lease_time_ms);

  for c in
    select cu.partition_id as pid, cu.committed_offset, cu.attempts, cu.lease_id as old_lease, cu.lease_owner,
           cu.lease_redrive, cu.last_error, p.name as pname, p.next_offset, p.first_offset
      from ${schema}.cursors cu
      join ${schema}.partitions p on p.id = cu.partition_id
     where cu.queue_id = v_qid and cu.group_name = p_group and cu.has_pending
       and (cu.lease_expires_at is null or cu.lease_expires_at <= now())
       and (cu.retry_at is null or cu.retry_at <= now())
       and (p_partition is null or p.name = p_partition)
       and (q.window_buffer_ms = 0 or p.last_message_at <= now() - ((q.window_buffer_ms) * interval '1 millisecond'))
     order by cu.picked_at
     limit p_max_partitions
     for update of cu skip locked
  loop
    v_committed := greatest(c.committed_offset, c.first_offset - 1);
    v_attempts := c.attempts;

    -- a lease that expired is a failed attempt
    if c.old_lease is not null then
      if c.lease_redrive is not null then
        update ${schema}.redeliveries r set attempts = r.attempts + 1
         where r.partition_id = c.pid and r.group_name = p_group and r."offset" = c.lease_redrive
         returning r.attempts into v_attempts;
        if v_attempts is not null and v_attempts > q.retry_limit then
          perform ${schema}.dead_letter(v_qid, q.dead_letter, c.pid, c.lease_redrive, p_group,
                                        'lease expired (owner ' || coalesce(c.lease_owner, '?') || ')', v_attempts);
          delete from ${schema}.redeliveries r
           where r.partition_id = c.pid and r.group_name = p_group and r."offset" = c.lease_redrive;
        end if;
        v_attempts := c.attempts;
      else
        v_attempts := v_attempts + 1;
        if v_attempts > q.retry_limit then
          perform ${schema}.dead_letter(v_qid, q.dead_letter, c.pid, v_committed + 1, p_group,
                                        'lease expired (owner ' || coalesce(c.lease_owner, '?') || ')', v_attempts);
          v_committed := v_committed + 1;
          v_attempts := 0;
        end if;
      end if;
      update ${schema}.cursors cu
         set lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null,
             lease_redrive = null, acked_ahead = null, committed_offset = v_committed, attempts = v_attempts,
             last_error = case when v_attempts = 0 then null else 'lease expired' end
       where cu.partition_id = c.pid and cu.group_name = p_group;
    end if;

    -- a redelivered dead letter goes first, alone
    select r."offset", r.attempts into rd
      from ${schema}.redeliveries r
     where r.partition_id = c.pid and r.group_name = p_group and (r.retry_at is null or r.retry_at <= now())
     order by r."offset" limit 1;
    if found then
      v_lease := case when p_auto_ack then null else gen_random_uuid() end;
      if p_auto_ack then
        delete from ${schema}.redeliveries r
         where r.partition_id = c.pid and r.group_name = p_group and r."offset" = rd."offset";
      end if;
      update ${schema}.cursors cu
         set lease_id = v_lease, lease_owner = p_owner,
             lease_expires_at = case when p_auto_ack then null else now() + ((v_lease_ms) * interval '1 millisecond') end,
             lease_ms = v_lease_ms, lease_from = null, lease_to = null, lease_redrive = case when p_auto_ack then null else rd."offset" end,
             picked_at = clock_timestamp()
       where cu.partition_id = c.pid and cu.group_name = p_group;
      return query
        select c.pname, m.partition_id, m."offset", m.id, m.transaction_id, m.trace_id, m.payload, m.created_at,
               v_lease, rd.attempts + 1
          from ${schema}.messages m where m.partition_id = c.pid and m."offset" = rd."offset";
      v_remaining := v_remaining - 1;
      exit when v_remaining <= 0;
      continue;
    end if;

    v_limit := case when v_attempts > 0 then 1 else v_remaining end;
    v_hi := least(v_committed + v_limit, c.next_offset - 1);
    if q.delayed_processing_ms > 0 and v_hi > v_committed then
      select min(m."offset") - 1 into v_delay_cut
        from ${schema}.messages m
       where m.partition_id = c.pid and m."offset" between v_committed + 1 and v_hi
         and m.created_at > now() - ((q.delayed_processing_ms) * interval '1 millisecond');
      if v_delay_cut is not null then
        v_hi := v_delay_cut;
      end if;
    end if;

    if v_hi <= v_committed then
      -- nothing deliverable now: maybe the flag is stale
      if v_committed >= c.next_offset - 1 then
        perform ${schema}.refresh_pending(c.pid, p_group);
      end if;
      continue;
    end if;

    if p_auto_ack then
      v_lease := null;
      update ${schema}.cursors cu
         set committed_offset = v_hi, attempts = 0, last_error = null, retry_at = null, acked_ahead = null,
             picked_at = clock_timestamp()
       where cu.partition_id = c.pid and cu.group_name = p_group;
      if v_hi >= c.next_offset - 1 then
        perform ${schema}.refresh_pending(c.pid, p_group);
      end if;
    else
      v_lease := gen_random_uuid();
      update ${schema}.cursors cu
         set lease_id = v_lease, lease_owner = p_owner,
             lease_expires_at = now() + ((v_lease_ms) * interval '1 millisecond'), lease_ms = v_lease_ms,
             lease_from = v_committed + 1, lease_to = v_hi, lease_redrive = null, acked_ahead = null,
             attempts = v_attempts, retry_at = null, picked_at = clock_timestamp()
       where cu.partition_id = c.pid and cu.group_name = p_group;
    end if;

    return query
      select c.pname, m.partition_id, m."offset", m.id, m.transaction_id, m.trace_id, m.payload, m.created_at,
             v_lease, case when m."offset" = v_committed + 1 then v_attempts + 1 else 1 end
        from ${schema}.messages m
       where m.partition_id = c.pid and m."offset" between v_committed + 1 and v_hi
       order by m."offset";
    v_remaining := v_remaining - (v_hi - v_committed)::int;
    exit when v_remaining <= 0;
  end loop;
end $$;

-- ---------------------------------------------------------------------------------------------
-- ack: per item (partition, group, offset, lease, status, error) an outcome:
-- ACKED, RETRY_SCHEDULED, DEAD_LETTERED, LEASE_LOST, REDELIVER. Fenced by the lease: a lease that
-- expired or changed hands changes nothing. Items are applied in offset order per partition;
-- completing a prefix moves the cursor over it; completed items ahead of a gap are remembered until
-- the gap closes (within the lease); a failure releases the lease, and later items of that partition
-- in the same call are not recorded (REDELIVER).
create function ${schema}.ack(p_pids bigint[], p_groups text[], p_offsets bigint[], p_leases uuid[],
                              p_statuses text[], p_errors text[])
returns table(idx int, outcome text)
language plpgsql as $$
declare
  n int := coalesce(cardinality(p_pids), 0);
  v_out text[];
  k record;
  c record;
  j int;
  v_o bigint;
  v_st text;
  v_err text;
  v_committed bigint;
  v_ahead bigint[];
  v_attempts int;
  v_error text;
  v_retry_at timestamptz;
  v_released boolean;
  v_head_changed boolean;
  v_ra int;
  v_fast_pids bigint[];
  v_fast_groups text[];
begin
  if n = 0 then
    return;
  end if;
  if cardinality(p_groups) <> n or cardinality(p_offsets) <> n or cardinality(p_leases) <> n
     or cardinality(p_statuses) <> n or cardinality(p_errors) <> n then
    raise exception 'ack: argument arrays differ in length' using errcode = '22023';
  end if;
  v_out := array_fill(null::text, array[n]);

  -- The common case in one statement: every item of a lease COMPLETED, covering exactly the leased
  -- range, under a live lease. The cursor moves to the end of the range and the lease is released.
  with g as (
    select x.pid, x.grp, x.lease, min(x.o) as mn, max(x.o) as mx, count(distinct x.o) as nd,
           bool_and(x.st = 'COMPLETED') as ok
      from unnest(p_pids, p_groups, p_leases, p_offsets, p_statuses) as x(pid, grp, lease, o, st)
     group by x.pid, x.grp, x.lease),
  target as (
    select cu.partition_id, cu.group_name, g.mx
      from g
      join ${schema}.cursors cu on cu.partition_id = g.pid and cu.group_name = g.grp
     where g.ok and cu.lease_id = g.lease and cu.lease_expires_at > now() and cu.lease_redrive is null
       and cu.acked_ahead is null and g.mn = cu.committed_offset + 1 and g.mx = cu.lease_to
       and g.nd = g.mx - g.mn + 1
     order by cu.partition_id, cu.group_name
       for update of cu),
  done as (
    update ${schema}.cursors cu
       set committed_offset = t.mx, attempts = 0, last_error = null, retry_at = null, acked_ahead = null,
           lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null
      from target t
     where cu.partition_id = t.partition_id and cu.group_name = t.group_name
    returning cu.partition_id, cu.group_name, cu.committed_offset)
  select array_agg(d.partition_id), array_agg(d.group_name) into v_fast_pids, v_fast_groups from done d;

  if v_fast_pids is not null then
    for k in select f.pid, f.grp from unnest(v_fast_pids, v_fast_groups) as f(pid, grp)
               join ${schema}.cursors cu on cu.partition_id = f.pid and cu.group_name = f.grp
               join ${schema}.partitions p on p.id = f.pid
              where cu.committed_offset >= p.next_offset - 1 loop
      perform ${schema}.refresh_pending(k.pid, k.grp);
    end loop;
    for k in select x.i from unnest(p_pids, p_groups) with ordinality as x(pid, grp, i)
               join unnest(v_fast_pids, v_fast_groups) as f(pid, grp) on f.pid = x.pid and f.grp = x.grp loop
      v_out[k.i] := 'ACKED';
    end loop;
  end if;

  -- Everything else, one (partition, group, lease) at a time, items in offset order.
  for k in select x.pid, x.grp, x.lease,
                  array_agg(x.i order by x.o, x.i) as idxs, array_agg(x.o order by x.o, x.i) as offs,
                  array_agg(x.st order by x.o, x.i) as sts, array_agg(x.err order by x.o, x.i) as errs
             from unnest(p_pids, p_groups, p_leases, p_offsets, p_statuses, p_errors)
                  with ordinality as x(pid, grp, lease, o, st, err, i)
            where v_fast_pids is null
               or not exists (select 1 from unnest(v_fast_pids, v_fast_groups) as f(pid, grp)
                               where f.pid = x.pid and f.grp = x.grp)
            group by x.pid, x.grp, x.lease
            order by x.pid, x.grp loop
    select cu.*, q.retry_limit, q.retry_delay_ms, q.dead_letter, q.id as qid
      into c
      from ${schema}.cursors cu join ${schema}.queues q on q.id = cu.queue_id
     where cu.partition_id = k.pid and cu.group_name = k.grp
       for update of cu;
    if not found or c.lease_id is null or c.lease_id is distinct from k.lease or c.lease_expires_at <= now() then
      for j in 1 .. cardinality(k.idxs) loop
        v_out[k.idxs[j]] := 'LEASE_LOST';
      end loop;
      continue;
    end if;

    -- a redelivered dead letter
    if c.lease_redrive is not null then
      for j in 1 .. cardinality(k.idxs) loop
        v_o := k.offs[j];
        v_st := k.sts[j];
        if v_o <> c.lease_redrive or (j > 1 and k.offs[j - 1] = v_o) then
          v_out[k.idxs[j]] := 'LEASE_LOST';
          continue;
        end if;
        if v_st = 'COMPLETED' then
          delete from ${schema}.redeliveries r
           where r.partition_id = k.pid and r.group_name = k.grp and r."offset" = v_o;
          v_out[k.idxs[j]] := 'ACKED';
        else
          update ${schema}.redeliveries r set attempts = r.attempts + 1,
                 retry_at = now() + ((c.retry_delay_ms) * interval '1 millisecond')
           where r.partition_id = k.pid and r.group_name = k.grp and r."offset" = v_o
           returning r.attempts into v_ra;
          if v_st = 'DEAD_LETTER' or v_ra > c.retry_limit then
            perform ${schema}.dead_letter(c.qid, c.dead_letter, k.pid, v_o, k.grp, k.errs[j], v_ra);
            delete from ${schema}.redeliveries r
             where r.partition_id = k.pid and r.group_name = k.grp and r."offset" = v_o;
            v_out[k.idxs[j]] := 'DEAD_LETTERED';
          else
            v_out[k.idxs[j]] := 'RETRY_SCHEDULED';
          end if;
        end if;
      end loop;
      update ${schema}.cursors cu
         set lease_id = null, lease_owner = null, lease_expires_at = null, lease_redrive = null
       where cu.partition_id = k.pid and cu.group_name = k.grp;
      perform ${schema}.refresh_pending(k.pid, k.grp);
      continue;
    end if;

    v_committed := c.committed_offset;
    v_ahead := coalesce(c.acked_ahead, '{}'::bigint[]);
    v_attempts := c.attempts;
    v_error := c.last_error;
    v_retry_at := null;
    v_released := false;
    v_head_changed := false;

    for j in 1 .. cardinality(k.idxs) loop
      v_o := k.offs[j];
      v_st := k.sts[j];
      v_err := k.errs[j];
      if v_released then
        v_out[k.idxs[j]] := 'REDELIVER';
      elsif v_o <= v_committed or v_o = any(v_ahead) then
        v_out[k.idxs[j]] := 'ACKED';
      elsif v_o < c.lease_from or v_o > c.lease_to then
        v_out[k.idxs[j]] := 'LEASE_LOST';
      elsif v_st = 'COMPLETED' then
        if v_o = v_committed + 1 then
          v_committed := v_o;
          v_head_changed := true;
          while v_committed + 1 = any(v_ahead) loop
            v_committed := v_committed + 1;
          end loop;
        else
          v_ahead := v_ahead || v_o;
        end if;
        v_out[k.idxs[j]] := 'ACKED';
      elsif v_o = v_committed + 1 then
        -- the head failed
        if v_head_changed then
          v_attempts := 0;
          v_head_changed := false;
        end if;
        v_attempts := v_attempts + 1;
        if v_st = 'DEAD_LETTER' or v_attempts > c.retry_limit then
          perform ${schema}.dead_letter(c.qid, c.dead_letter, k.pid, v_o, k.grp, v_err, v_attempts);
          v_committed := v_o;
          v_head_changed := true;
          while v_committed + 1 = any(v_ahead) loop
            v_committed := v_committed + 1;
          end loop;
          v_out[k.idxs[j]] := 'DEAD_LETTERED';
        else
          v_error := v_err;
          v_retry_at := now() + ((c.retry_delay_ms) * interval '1 millisecond');
          v_released := true;
          v_out[k.idxs[j]] := 'RETRY_SCHEDULED';
        end if;
      else
        -- a failure behind unacknowledged messages: the lease is released and the whole rest is
        -- redelivered; the failure is not counted against a message that is not the head
        v_released := true;
        v_out[k.idxs[j]] := 'RETRY_SCHEDULED';
      end if;
    end loop;

    if v_head_changed then
      v_attempts := 0;
      v_error := null;
    end if;
    if v_committed >= c.lease_to then
      v_released := true;
    end if;
    update ${schema}.cursors cu
       set committed_offset = v_committed,
           acked_ahead = case when v_released then null
                              else (select array_agg(a) from unnest(v_ahead) a where a > v_committed) end,
           attempts = v_attempts, last_error = v_error, retry_at = v_retry_at,
           lease_id = case when v_released then null else cu.lease_id end,
           lease_owner = case when v_released then null else cu.lease_owner end,
           lease_expires_at = case when v_released then null else cu.lease_expires_at end,
           lease_from = case when v_released then null else cu.lease_from end,
           lease_to = case when v_released then null else cu.lease_to end
     where cu.partition_id = k.pid and cu.group_name = k.grp;
    if v_released and v_committed >= (select p.next_offset - 1 from ${schema}.partitions p where p.id = k.pid) then
      perform ${schema}.refresh_pending(k.pid, k.grp);
    end if;
  end loop;

  return query select g.i::int, v_out[g.i] from generate_subscripts(v_out, 1) as g(i) order by g.i;
end $$;

-- Extends leases by their own length. Returns the (partition, group, lease) that were renewed.
create function ${schema}.renew(p_pids bigint[], p_groups text[], p_leases uuid[])
returns table(partition_id bigint, group_name text, lease_id uuid)
language sql as $$
  update ${schema}.cursors cu
     set lease_expires_at = now() + coalesce(cu.lease_ms, 30000) * interval '1 millisecond'
    from unnest(p_pids, p_groups, p_leases) as x(pid, grp, lease)
   where cu.partition_id = x.pid and cu.group_name = x.grp and cu.lease_id = x.lease
     and cu.lease_expires_at > now()
  returning cu.partition_id, cu.group_name, cu.lease_id
$$;

-- Gives leases back without counting an attempt (a consumer that stops cleanly).
create function ${schema}.release(p_pids bigint[], p_groups text[], p_leases uuid[]) returns int
language plpgsql as $$
declare
  v int;
begin
  update ${schema}.cursors cu
     set lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null,
         lease_redrive = null, acked_ahead = null
    from unnest(p_pids, p_groups, p_leases) as x(pid, grp, lease)
   where cu.partition_id = x.pid and cu.group_name = x.grp and cu.lease_id = x.lease;
  get diagnostics v = row_count;
  return v;
end $$;

-- Moves every cursor of a group: p_mode 'BEGINNING', 'END' or 'TIME' (first message at or after p_at).
create function ${schema}.seek(p_queue text, p_group text, p_mode text, p_at timestamptz) returns int
language plpgsql as $$
declare
  v_qid bigint;
  r record;
  v int := 0;
begin
  select id into v_qid from ${schema}.queues where name = p_queue;
  if v_qid is null then
    return 0;
  end if;
  perform ${schema}.ensure_group(v_qid, p_group, 'NEW', null);
  for r in select p.id, p.next_offset, p.first_offset
             from ${schema}.partitions p where p.queue_id = v_qid order by p.id for share loop
    update ${schema}.cursors cu
       set committed_offset = case p_mode
             when 'BEGINNING' then r.first_offset - 1
             when 'END' then r.next_offset - 1
             else coalesce((select min(m."offset") - 1 from ${schema}.messages m
                             where m.partition_id = r.id and m.created_at >= p_at), r.next_offset - 1) end,
           lease_id = null, lease_owner = null, lease_expires_at = null, lease_from = null, lease_to = null,
           lease_redrive = null, acked_ahead = null, attempts = 0, last_error = null, retry_at = null
     where cu.partition_id = r.id and cu.group_name = p_group;
    update ${schema}.cursors cu
       set has_pending = cu.committed_offset < r.next_offset - 1
                         or exists (select 1 from ${schema}.redeliveries d
                                     where d.partition_id = r.id and d.group_name = p_group)
     where cu.partition_id = r.id and cu.group_name = p_group;
    v := v + 1;
  end loop;
  return v;
end $$;

-- Every lookup in these functions is meant to be an index probe. Plans are cached per pooled session;
-- one cached while a table was empty or freshly analysed as small is a sequential scan, and it stays
-- while the table grows (the benchmark once saw a drain of 100,000 partitions stall on such plans).
-- With sequential scans disfavoured here, the cached plan is the probe whatever the statistics say.
alter function ${schema}.push(text[], text[], jsonb[], text[], text[], boolean) set enable_seqscan = off;
alter function ${schema}.push_fast(text[], text[], int[], int[], uuid[], jsonb[], text[]) set enable_seqscan = off;
alter function ${schema}.pop(text, text, int, int, text, bigint, text, text, timestamptz, boolean) set enable_seqscan = off;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[]) set enable_seqscan = off;
alter function ${schema}.refresh_pending(bigint, text) set enable_seqscan = off;
