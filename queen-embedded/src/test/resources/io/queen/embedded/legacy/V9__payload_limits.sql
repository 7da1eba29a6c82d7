-- Payloads a node cannot decode (issue 8).
--
-- Every node reads whatever any node may write (64 MiB of JSON), but a message can still be stored
-- that a reader refuses: inserted by hand through SQL, or written under another ObjectMapper's
-- limits. The pop takes its lease before Java sees the payload, so Java then deals with it without
-- blocking the partition or breaking the one-holder rule: an undecodable message at the head of its
-- partition's batch is dead-lettered at once through ack (status DEAD_LETTER, under the lease just
-- taken), and one behind messages that were delivered cuts the lease short with shrink_lease, so the
-- consumer's acks of what it got release the lease and the next pop has the undecodable message at
-- its head. Order is kept: nothing after it is delivered before it is dealt with.

-- Shortens a live lease so that it ends at p_to (which must be inside it). Returns whether it did.
create function ${schema}.shrink_lease(p_pid bigint, p_group text, p_lease uuid, p_to bigint) returns boolean
language plpgsql as $$
begin
  update ${schema}.cursors cu
     set lease_to = p_to
   where cu.partition_id = p_pid and cu.group_name = p_group and cu.lease_id = p_lease
     and cu.lease_expires_at > now() and cu.lease_redrive is null
     and p_to >= cu.lease_from and p_to < cu.lease_to;
  return found;
end $$;

alter function ${schema}.shrink_lease(bigint, text, uuid, bigint) set enable_seqscan = off;
