-- The idempotency shape of a bundle, KV writes then acks, in one call: the writes and acks are exactly kv_write_many
-- and ack; when a required write does not apply, or an ack finds its lease lost, the block's work is undone (a
-- subtransaction) and the results tell which: kind 'kv' rows carry the writes' results (ending at the failing one),
-- kind 'ack' rows the acks' outcomes (absent when a write failed first), and 'fail' is 'kv' or 'lease' on every row
-- when the bundle did not apply. Fenced for finished messages too: a bundle that acks a message another consumer
-- finished after taking the partition over (ALREADY_ACKED under a lease that no longer holds the partition) applies
-- nothing, so a consumer that stalled past its lease cannot commit its effects a second time. An ALREADY_ACKED under
-- the caller's own live lease, or one the same call released by completing the leased range, still succeeds.

create or replace function ${schema}.bundle_kv_ack_fenced(p_ops text[], p_ns text[], p_keys text[], p_values text[],
                                                          p_delta bigint[], p_ttl_ms bigint[], p_forever boolean[],
                                                          p_expect bigint[], p_max bigint[], p_required boolean[],
                                                          p_pids bigint[], p_groups text[], p_offsets bigint[],
                                                          p_leases uuid[], p_statuses text[], p_errors text[])
returns table(kind text, op_index integer, w_applied boolean, w_reason text, w_found boolean, w_value text,
              w_version bigint, w_expires_at timestamp with time zone, ack_outcome text, fail text)
language plpgsql
set enable_seqscan = off
set jit = off
set max_parallel_workers_per_gather = 0
as $$
declare
  v_kv record;
  v_ack_idx int[] := '{}';
  v_ack_out text[] := '{}';
  v_fail text;
  v_k int[] := '{}';
  v_a boolean[] := '{}';
  v_r text[] := '{}';
  v_f boolean[] := '{}';
  v_v text[] := '{}';
  v_ver bigint[] := '{}';
  v_exp timestamptz[] := '{}';
  a record;
begin
  begin
    for v_kv in select * from ${schema}.kv_write_many(p_ops, p_ns, p_keys, p_values, p_delta, p_ttl_ms, p_forever,
                                                      p_expect, p_max, p_required) loop
      v_k := v_k || v_kv.op_index;
      v_a := v_a || v_kv.w_applied;
      v_r := v_r || v_kv.w_reason;
      v_f := v_f || v_kv.w_found;
      v_v := v_v || v_kv.w_value;
      v_ver := v_ver || v_kv.w_version;
      v_exp := v_exp || v_kv.w_expires_at;
      if p_required[v_kv.op_index] and not v_kv.w_applied then
        v_fail := 'kv';
      end if;
    end loop;
    if v_fail is null then
      for a in select * from ${schema}.ack(p_pids, p_groups, p_offsets, p_leases, p_statuses, p_errors) loop
        v_ack_idx := v_ack_idx || a.idx;
        v_ack_out := v_ack_out || a.outcome;
        if a.outcome = 'LEASE_LOST' then
          v_fail := 'lease';
        end if;
      end loop;
      if v_fail is null and 'ALREADY_ACKED' = any(v_ack_out) then
        -- finished by another consumer (its lease no longer holds the partition, and this call acknowledged nothing
        -- of the partition under it): the bundle's writes would repeat that consumer's effects
        if exists (select 1 from generate_subscripts(v_ack_idx, 1) k
                   where v_ack_out[k] = 'ALREADY_ACKED'
                     and not exists (select 1 from generate_subscripts(v_ack_idx, 1) j
                                     where v_ack_out[j] = 'ACKED'
                                       and p_pids[v_ack_idx[j]] = p_pids[v_ack_idx[k]]
                                       and p_groups[v_ack_idx[j]] = p_groups[v_ack_idx[k]]
                                       and p_leases[v_ack_idx[j]] = p_leases[v_ack_idx[k]])
                     and not exists (select 1 from ${schema}.cursors cu
                                     where cu.partition_id = p_pids[v_ack_idx[k]]
                                       and cu.group_name = p_groups[v_ack_idx[k]]
                                       and cu.lease_id = p_leases[v_ack_idx[k]])) then
          v_fail := 'done';
        end if;
      end if;
    end if;
    if v_fail is not null then
      raise exception 'bundle did not apply' using errcode = 'QB001';
    end if;
  exception when sqlstate 'QB001' then
    null; -- the writes and acks of the block are undone; the results above say why
  end;
  for i in 1 .. coalesce(cardinality(v_k), 0) loop
    return query select 'kv'::text, v_k[i], v_a[i], v_r[i], v_f[i], v_v[i], v_ver[i], v_exp[i], null::text, v_fail;
  end loop;
  for i in 1 .. coalesce(cardinality(v_ack_idx), 0) loop
    return query select 'ack'::text, v_ack_idx[i], null::boolean, null::text, null::boolean, null::text, null::bigint,
                        null::timestamptz, v_ack_out[i], v_fail;
  end loop;
end $$;
