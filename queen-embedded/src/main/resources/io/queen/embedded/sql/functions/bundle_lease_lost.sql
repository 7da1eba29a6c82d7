-- Raises QB002: called by the marker fast path of a bundle (KvStore.markersThenAck, one plain statement of marker
-- inserts and acks) when an ack finds its lease lost, so the whole statement fails and the client runs the bundle
-- through bundle_kv_ack_fenced, which says exactly why.

create or replace function ${schema}.bundle_lease_lost()
returns boolean
language plpgsql
set jit = off
set max_parallel_workers_per_gather = 0
as $$
begin
  raise exception 'bundle: a lease was lost' using errcode = 'QB002';
end $$;
