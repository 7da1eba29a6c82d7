-- Plans made once, for the two calls every producer and consumer makes most.
--
-- PL/pgSQL caches a plan per statement and session, but for a statement with parameters PostgreSQL's
-- plan cache first makes five custom plans and then keeps a generic one only when its estimated cost
-- is no worse than theirs. With arrays as parameters (unknown length in a generic plan) that test
-- fails, and every call plans its statements again: measured with one client and no commit waits,
-- push_fast spent more than half of its 0.65 ms per single-message push in the planner, and ack about
-- a quarter of a pop + ack. Their statements are key lookups and key-ordered updates that have one
-- good plan whatever the arrays hold (and sequential scans are already off for them), so they are
-- told to use the generic plan: push_fast 0.65 -> 0.30 ms, pop + ack 1.09 -> 0.84 ms.
--
-- Not here, on purpose: pop and push. Their statements filter on optional arguments
-- ("p_partition is null or p.name = p_partition") that only a custom plan can drop, and forcing the
-- generic plan made them slower (pop + ack 7 ms, push 1.5 -> 2.5 ms). The KV functions take scalar
-- arguments and already settle on their generic plans.
alter function ${schema}.push_fast(text[], text[], int[], int[], uuid[], jsonb[], text[])
  set plan_cache_mode = force_generic_plan;
alter function ${schema}.ack(bigint[], text[], bigint[], uuid[], text[], text[])
  set plan_cache_mode = force_generic_plan;
