-- The check that a new partition's queue exists, once per statement instead of once per row (issue 10: the source
-- connector's push creates about 1,000 partitions per call).
--
-- The foreign key partitions.queue_id -> queues(id) ran its check as a trigger per inserted row: a query and a KEY
-- SHARE lock of the same queue row, 1,000 times per source bundle, about half the time of the partition insert
-- (10-13 ms without it against 24-29 ms, V23's measurements). It is replaced by two statement-level triggers with
-- transition tables that keep what the key meant:
--   * after an insert into partitions: the queue rows of the new rows are taken FOR KEY SHARE (in id order), as the
--     key's check took them, so ensure_group (FOR UPDATE on the queue row) and a queue's deletion still wait for a
--     push that is creating partitions, and it for them; a new row whose queue does not exist (never did, or was
--     deleted while the push waited) fails the statement with 23503, as the key did;
--   * after a delete from queues: the partitions of the deleted queues are deleted (what ON DELETE CASCADE did;
--     their cursors and retention losses follow through their own keys).
-- No other statement updates partitions.queue_id.

alter table ${schema}.partitions drop constraint partitions_queue_id_fkey;

create function ${schema}.partitions_queue_exists() returns trigger
language plpgsql as $$
declare
  v_missing bigint;
begin
  perform 1 from ${schema}.queues q
   where q.id in (select distinct n.queue_id from new_partitions n)
   order by q.id for key share;
  select n.queue_id into v_missing from new_partitions n
   where not exists (select 1 from ${schema}.queues q where q.id = n.queue_id) limit 1;
  if v_missing is not null then
    raise exception 'a new partition names queue id %, which does not exist', v_missing using errcode = '23503';
  end if;
  return null;
end $$;

create trigger partitions_queue_exists after insert on ${schema}.partitions
  referencing new table as new_partitions
  for each statement execute function ${schema}.partitions_queue_exists();

create function ${schema}.queues_delete_partitions() returns trigger
language plpgsql as $$
begin
  delete from ${schema}.partitions p where p.queue_id in (select o.id from deleted_queues o);
  return null;
end $$;

create trigger queues_delete_partitions after delete on ${schema}.queues
  referencing old table as deleted_queues
  for each statement execute function ${schema}.queues_delete_partitions();
