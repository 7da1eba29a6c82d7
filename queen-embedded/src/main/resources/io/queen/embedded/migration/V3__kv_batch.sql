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
