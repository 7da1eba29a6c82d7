-- Keys that cannot split a cluster.
--
-- encryption_keys: the ids of the keys the cluster seals payloads with (an id is 16 hex digits of SHA-256 over a label
-- and the key: it names a key and reveals nothing of it). A node whose key is not listed refuses to start while the
-- list has any id, and refuses to seal a push while its id is not listed; a key gets listed only by a node started
-- with adoptEncryptionKey() (the first key of a cluster, or the next one of a rotation, which that node proves by
-- holding a listed key too). The ids stored with messages at this migration are listed: they are the keys in use.

create table ${schema}.encryption_keys (
  key_id     text primary key check (key_id ~ '^[0-9a-f]{16}$'),
  adopted_at timestamptz not null default now(),
  adopted_by text not null
);

insert into ${schema}.encryption_keys(key_id, adopted_by)
select distinct m.key_id, 'stored messages' from ${schema}.messages m where m.key_id is not null
on conflict do nothing;
