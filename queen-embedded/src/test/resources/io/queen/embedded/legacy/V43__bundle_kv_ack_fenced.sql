-- A bundle that pushes or writes, and acks a message another consumer finished after taking the partition over,
-- applies nothing (the CommitResult reason ALREADY_ACKED). A pause campaign found the hole: a consumer stalled past
-- its lease (a long pause, a frozen host) while another node took the partition over and finished the message; when
-- it went on, its bundle (the effect's push and the ack) committed, because an ack of a message the group is past
-- answers ALREADY_ACKED, a success, whatever lease it carries (V7). The effect was made twice, and out of order. The
-- transaction is meant to be the fence that keeps a zombie's effects out; now it is, for a finished message too.
--
-- Which ALREADY_ACKED fails the bundle: one whose lease no longer holds the partition (the cursor names another
-- lease, or none), unless the same call acknowledged (ACKED) another message of that partition under that lease (the
-- call itself completed the leased range and so released it). An ALREADY_ACKED under the consumer's own live lease
-- (a message it acknowledged on its own before, e.g. a poison message dead-lettered one by one, then the batch's ack
-- in the bundle) keeps its meaning: a success that changes nothing. A bundle of acks alone is unchanged. The Java
-- side applies the same rule on its general path; the marker statement falls back to this function on any
-- ALREADY_ACKED (KvStore).
--
-- A new function rather than a new body for bundle_kv_ack: during a rolling upgrade nodes of the version before keep
-- calling bundle_kv_ack and reading its answers as they always did ("done" would have been read as a success by them,
-- for a bundle this function had undone). Those nodes do not have the fence; it holds once every node runs this
-- version or later.
create function ${schema}.bundle_kv_ack_fenced(p_ops text[], p_ns text[], p_keys text[], p_values text[],
                                        p_delta bigint[], p_ttl_ms bigint[], p_forever boolean[],
                                        p_expect bigint[], p_max bigint[], p_required boolean[],
                                        p_pids bigint[], p_groups text[], p_offsets bigint[], p_leases uuid[],
                                        p_statuses text[], p_errors text[])
returns table(kind text, op_index int, w_applied boolean, w_reason text, w_found boolean, w_value text,
              w_version bigint, w_expires_at timestamptz, ack_outcome text, fail text)
language plpgsql volatile set enable_seqscan = off as $fn$
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
end $fn$;
