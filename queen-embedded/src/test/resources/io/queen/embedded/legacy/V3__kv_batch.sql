-- Runs a bundle's consecutive KV writes in one call: one round trip instead of one per write, which
-- is most of what a once() per message cost inside an ack's bundle (the write itself is ~0.05 ms of
-- server time; the round trip, parse and bind around it ~0.45 ms). Each write is exactly the single
-- function it stands for (kv_put, kv_put_if_absent = kv_put with expect 0, kv_incr, kv_delete), in
-- order; the run stops after the first write that is required and did not apply, as the bundle does.
create function ${schema}.kv_write_many(p_ops text[], p_ns text[], p_keys text[], p_values text[],
                                        p_delta bigint[], p_ttl_ms bigint[], p_forever boolean[],
                                        p_expect bigint[], p_max bigint[], p_required boolean[])
returns table(op_index int, w_applied boolean, w_reason text, w_found boolean, w_value text, w_version bigint,
              w_expires_at timestamptz)
language plpgsql volatile as $fn$
declare
  r ${schema}.kv_result;
  j int;
begin
  for j in 1 .. coalesce(cardinality(p_ops), 0) loop
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
    op_index := j;
    w_applied := r.applied;
    w_reason := r.reason;
    w_found := r.found;
    w_value := r.value::text;
    w_version := r.version;
    w_expires_at := r.expires_at;
    return next;
    exit when p_required[j] and not r.applied;
  end loop;
end $fn$;

-- Key lookups must stay index probes whatever the statistics say. A plan cached in a pooled session
-- while the kv table was empty (just analysed, say) is a sequential scan, and it stays cached while the
-- table grows: one write then costs milliseconds (the benchmark measured 3.7 ms per once() against
-- 0.06 ms). With sequential scans disfavoured inside these functions the cached plan is the index probe.
alter function ${schema}.kv_put(text, text, text, bigint, boolean, bigint) set enable_seqscan = off;
alter function ${schema}.kv_incr(text, text, bigint, bigint, boolean, bigint) set enable_seqscan = off;
alter function ${schema}.kv_delete(text, text, bigint) set enable_seqscan = off;

-- The idempotency shape of a bundle, KV writes then acks (once() per message + ack of the batch), in
-- one auto-commit call instead of BEGIN, a KV call, an ack call and COMMIT. The writes and acks are
-- exactly kv_write_many and ack; when a required write does not apply, or an ack finds its lease lost,
-- the block's work is undone (a subtransaction) and the results tell which: kind 'kv' rows carry the
-- writes' results (ending at the failing one), kind 'ack' rows the acks' outcomes (absent when a write
-- failed first), and 'fail' is 'kv' or 'lease' on every row when the bundle did not apply.
create function ${schema}.bundle_kv_ack(p_ops text[], p_ns text[], p_keys text[], p_values text[],
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
