-- One step of retention in one partition: removes up to p_batch of the oldest messages past the queue's retention
-- that every group's cursor has passed (or all of them, with allow_drop_past_committed, recording what each group
-- lost in retention_losses), with their dead-letter rows and redeliveries. Returns what it removed and, when it
-- stopped short, why (skipped), the oldest message kept and the group holding it back.

create or replace function ${schema}.retention_step(p_pid bigint, p_batch integer)
returns table(removed integer, skipped text, first_at timestamp with time zone, first_offset bigint, held_by text,
              lost_groups text[], lost_counts bigint[], lost_to bigint)
language plpgsql
set enable_seqscan = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  p record;
  q record;
  v_age_hi bigint;
  v_done_hi bigint;
  v_min bigint;
  v_min_group text;
  v_rd bigint;
  v_rd_group text;
  v_lease bigint;
  v_lease_group text;
  v_hi bigint;
  v_want bigint;
  v_holder text;
  v_removed int := 0;
  v_lost_groups text[];
  v_lost_counts bigint[];
  v_first_at timestamptz;
  v_lo bigint;
begin
  if not pg_try_advisory_xact_lock(1364542790, hashtext(${schema_literal} || ':retention')) then
    return query select 0, 'lock'::text, null::timestamptz, null::bigint, null::text, null::text[], null::bigint[], null::bigint;
    return;
  end if;
  select pp.queue_id, pp.first_offset as lo, pp.next_offset as nx into p
    from ${schema}.partitions pp where pp.id = p_pid for no key update skip locked;
  if not found then
    return query select 0, 'partition'::text, null::timestamptz, null::bigint, null::text, null::text[], null::bigint[], null::bigint;
    return;
  end if;
  select qq.retention_ms, qq.completed_retention_ms, qq.allow_drop_past_committed as dropping into q
    from ${schema}.queues qq where qq.id = p.queue_id;
  v_lo := p.lo;

  if p.lo < p.nx and (q.retention_ms > 0 or q.completed_retention_ms > 0) then
    -- the age prefixes: the last offset before the first message too young for each rule
    select coalesce(min(m."offset") filter (where q.retention_ms = 0
                      or m.created_at > now() - q.retention_ms * interval '1 millisecond') - 1, max(m."offset")),
           coalesce(min(m."offset") filter (where q.completed_retention_ms = 0
                      or m.created_at > now() - q.completed_retention_ms * interval '1 millisecond') - 1, max(m."offset"))
      into v_age_hi, v_done_hi
      from (select mm."offset", mm.created_at from ${schema}.messages mm
             where mm.partition_id = p_pid and mm."offset" >= p.lo order by mm."offset" limit p_batch) m;
    v_want := greatest(v_age_hi, v_done_hi);

    -- every group's cursor (each group has one on every partition of its queue)
    select c.committed_offset, c.group_name into v_min, v_min_group
      from ${schema}.cursors c where c.partition_id = p_pid order by c.committed_offset, c.group_name limit 1;
    v_min := coalesce(v_min, p.nx - 1);
    select r."offset" - 1, r.group_name into v_rd, v_rd_group
      from ${schema}.redeliveries r where r.partition_id = p_pid order by r."offset", r.group_name limit 1;
    if v_rd is not null and v_rd < v_min then
      v_min := v_rd;
      v_min_group := v_rd_group;
    end if;

    if q.dropping then
      v_hi := greatest(v_age_hi, least(v_done_hi, v_min));
      if v_hi > v_min then
        -- lock the cursors that fall behind (waits for a pop or ack of theirs in flight), then let no live
        -- lease's range be removed
        perform 1 from ${schema}.cursors c
         where c.partition_id = p_pid and c.committed_offset < v_hi order by c.group_name for update;
        select coalesce(c.lease_redrive, c.lease_from) - 1, c.group_name into v_lease, v_lease_group
          from ${schema}.cursors c
         where c.partition_id = p_pid and c.lease_expires_at > now()
           and coalesce(c.lease_redrive, c.lease_from) <= v_hi
         order by coalesce(c.lease_redrive, c.lease_from), c.group_name limit 1;
        if v_lease is not null then
          v_hi := greatest(v_lease, least(v_done_hi, v_min));
          v_holder := v_lease_group;
        end if;
      end if;
    else
      v_hi := least(v_want, v_min);
      if v_min < v_want then
        v_holder := v_min_group;
      end if;
    end if;

    if v_hi >= p.lo then
      if q.dropping and v_hi > v_min then
        with behind as (
          select c.partition_id, c.group_name, v_hi - greatest(c.committed_offset, p.lo - 1) as lost
            from ${schema}.cursors c
           where c.partition_id = p_pid and c.committed_offset < v_hi
             and (c.lease_expires_at is null or c.lease_expires_at <= now()
                  or coalesce(c.lease_redrive, c.lease_from) > v_hi)),
        moved as (
          update ${schema}.cursors cu
             set committed_offset = v_hi, attempts = 0, last_error = null, retry_at = null, acked_ahead = null,
                 -- exact: the partition is locked, and this group's redeliveries were below its cursor, so removed
                 has_pending = cu.has_pending and v_hi < p.nx - 1,
                 lease_id = case when cu.lease_expires_at > now() then cu.lease_id end,
                 lease_owner = case when cu.lease_expires_at > now() then cu.lease_owner end,
                 lease_from = case when cu.lease_expires_at > now() then cu.lease_from end,
                 lease_to = case when cu.lease_expires_at > now() then cu.lease_to end,
                 lease_redrive = case when cu.lease_expires_at > now() then cu.lease_redrive end,
                 lease_expires_at = case when cu.lease_expires_at > now() then cu.lease_expires_at end
            from behind b
           where cu.partition_id = b.partition_id and cu.group_name = b.group_name
          returning b.group_name, b.lost),
        recorded as (
          insert into ${schema}.retention_losses as l (partition_id, group_name, queue_id, messages, up_to, at)
          select p_pid, mv.group_name, p.queue_id, mv.lost, v_hi, now() from moved mv where mv.lost > 0
          on conflict (partition_id, group_name) do update
             set messages = l.messages + excluded.messages, up_to = excluded.up_to, at = excluded.at)
        select array_agg(mv.group_name order by mv.group_name), array_agg(mv.lost order by mv.group_name)
          into v_lost_groups, v_lost_counts
          from moved mv where mv.lost > 0;
      end if;
      delete from ${schema}.dead_letters d where d.partition_id = p_pid and d."offset" between p.lo and v_hi;
      delete from ${schema}.redeliveries r where r.partition_id = p_pid and r."offset" between p.lo and v_hi;
      delete from ${schema}.messages m where m.partition_id = p_pid and m."offset" between p.lo and v_hi;
      get diagnostics v_removed = row_count;
      update ${schema}.partitions pp set first_offset = v_hi + 1 where pp.id = p_pid;
      v_lo := v_hi + 1;
    end if;
  end if;

  select m.created_at into v_first_at from ${schema}.messages m where m.partition_id = p_pid and m."offset" = v_lo;
  return query select v_removed, null::text, v_first_at, v_lo, v_holder, v_lost_groups, v_lost_counts,
                      case when v_lost_groups is null then null::bigint else v_hi end;
end $$;
