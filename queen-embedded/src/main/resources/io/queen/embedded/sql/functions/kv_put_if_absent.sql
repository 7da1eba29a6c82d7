-- putIfAbsent (once): writes only when no live key exists; 'exists' otherwise. An expired row does not count: the
-- write wins against it.

create or replace function ${schema}.kv_put_if_absent(p_ns text, p_key text, p_value text, p_ttl_ms bigint,
                                                      p_forever boolean)
returns ${schema}.kv_result
language sql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
  select * from ${schema}.kv_put(p_ns, p_key, p_value, p_ttl_ms, p_forever, 0)
$$;
