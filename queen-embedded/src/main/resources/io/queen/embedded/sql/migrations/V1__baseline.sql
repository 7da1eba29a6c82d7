-- Queen's tables: queues, partitions, the message log, consumer groups, cursors with leases, dead letters, KV, the
-- nodes, retention's bookkeeping, push receipts. The functions that read and write them are in ../functions, one file
-- per function. ${schema} is replaced by the quoted schema name.
--
-- The log: messages(partition_id, offset) with per-partition gapless offsets handed out under the partition's row
-- lock, so offsets become visible in commit order and a cursor never jumps over a message not committed yet.
--
-- Lock order, everywhere: queue size advisory locks (by queue id), then partition rows (by id), then cursor rows (by
-- (partition_id, group_name)). The one exception is ack and pop, which lock a cursor and then take a SHARE lock on its
-- partition only to clear has_pending; that cannot deadlock with push, which locks only cursor rows whose has_pending
-- is false, while a cursor being acked or popped has it true.
--
-- requires functions: partitions_queue_exists, queues_delete_partitions, queue_sealed

create table ${schema}.queues (
  id                        bigint generated always as identity primary key,
  name                      text not null unique,
  lease_time_ms             bigint not null default 30000,
  retry_limit               int not null default 3,
  retry_delay_ms            bigint not null default 0,
  dead_letter               boolean not null default true,
  delayed_processing_ms     bigint not null default 0,
  window_buffer_ms          bigint not null default 0,
  max_size                  bigint not null default 0,
  created_at                timestamptz not null default now(),
  retention_ms              bigint not null default 0,
  completed_retention_ms    bigint not null default 0,
  allow_drop_past_committed boolean not null default false,
  pending_alert_after_ms    bigint not null default 0,
  encryption                boolean not null default false,
  -- the queue has had encryption on (set by the trigger queues_sealed, never cleared), so it may hold sealed payloads
  -- even after encryption was switched off: only such queues pay for pop's key check
  sealed                    boolean not null default false
);

create trigger queues_sealed before insert or update of encryption on ${schema}.queues
  for each row when (new.encryption) execute function ${schema}.queue_sealed();

-- The ids of the keys the cluster seals payloads with (an id is 16 hex digits of SHA-256 over a label and the key: it
-- names a key and reveals nothing of it). A node whose key is not listed refuses to start while the table lists any
-- id, and refuses to seal a push while its id is not listed; a key is listed only by a node started with
-- adoptEncryptionKey() (the first key of a cluster, or the next one of a rotation, which that node proves by holding a
-- listed key too).
create table ${schema}.encryption_keys (
  key_id     text primary key check (key_id ~ '^[0-9a-f]{16}$'),
  adopted_at timestamptz not null default now(),
  adopted_by text not null
);

-- No foreign key to queues: a push that creates 1,000 partitions would check it 1,000 times, taking the queue row's
-- KEY SHARE lock each time. The statement trigger partitions_queue_exists checks once per insert statement instead,
-- and queues_delete_partitions does what "on delete cascade" did.
--
-- Every push updates its partitions' rows and every ack may read them: the pages keep most of their room free
-- (fillfactor 20) so that, even while a long transaction holds the xmin horizon, an update stays on its page (HOT) and
-- the keys' index entries grow slowly; the keys keep one index entry per row version (deduplicate_items off) so a probe
-- finds the live version first. An operator who would rather have the room may set fillfactor back to 50: look-ups
-- stay the same, writes under a held horizon slow down (src-test/bench/BENCHMARKS.md).
create table ${schema}.partitions (
  id              bigint generated always as identity,
  queue_id        bigint not null,
  name            text not null,
  next_offset     bigint not null default 0,  -- the next offset a push hands out
  first_offset    bigint not null default 0,  -- the oldest offset retention has kept
  last_message_at timestamptz,                 -- the last push: a partition pushed to in the last 100 ms is busy
  created_at      timestamptz not null default now(),
  constraint partitions_pkey primary key (id) with (deduplicate_items = off),
  constraint partitions_queue_id_name_key unique (queue_id, name) with (deduplicate_items = off)
) with (fillfactor = 20);

create trigger partitions_queue_exists after insert on ${schema}.partitions
  referencing new table as new_partitions for each statement execute function ${schema}.partitions_queue_exists();
create trigger queues_delete_partitions after delete on ${schema}.queues
  referencing old table as deleted_queues for each statement execute function ${schema}.queues_delete_partitions();

-- Retention's bulk deletes need a vacuum that keeps up: this table's vacuum runs without cost pauses. An operator who
-- wants the server-wide setting back: alter table <schema>.messages reset (autovacuum_vacuum_cost_delay).
create table ${schema}.messages (
  partition_id    bigint not null,
  "offset"        bigint not null,
  id              uuid not null,
  transaction_id  text,
  trace_id        text,
  payload         jsonb not null,
  created_at      timestamptz not null default now(),
  payload_type    text,     -- a typed payload's type and version (null: untyped)
  payload_version int,
  key_id          text,     -- the key an encrypted payload is sealed with (null: plain)
  primary key (partition_id, "offset")
) with (autovacuum_vacuum_cost_delay = 0);
create unique index messages_transaction_id on ${schema}.messages (partition_id, transaction_id)
  where transaction_id is not null;

create table ${schema}.consumer_groups (
  queue_id       bigint not null references ${schema}.queues(id) on delete cascade,
  name           text not null,
  mode           text not null check (mode in ('ALL', 'NEW', 'FROM')),
  start_at       timestamptz,
  created_at     timestamptz not null default now(),
  -- false for a group whose consumer counts its own attempts (the SPI's ConsumeSpec.expiryCounts, a Postgres sink):
  -- an expired lease is no attempt, and a FAILED ack never dead-letters by the queue's retryLimit
  expiry_counts  boolean not null default true,
  -- the last pop, ack or seek, or a connector holding the group: groupIdleExpiry removes the idle ones
  last_active_at timestamptz not null default now(),
  primary key (queue_id, name)
);

-- One row per (partition, group): everything <= committed_offset is done for the group.
-- has_pending: the partition may hold something for the group (messages after the cursor or a redelivery). Set by
-- push (only when false), kept while the partition is busy, cleared by ack and pop under a SHARE lock on the partition.
-- Acks update these rows all the time: fillfactor 10 and deduplicate_items off, as for partitions above (an operator
-- may set fillfactor back to 70).
create table ${schema}.cursors (
  partition_id     bigint not null references ${schema}.partitions(id) on delete cascade,
  group_name       text not null,
  queue_id         bigint not null,
  committed_offset bigint not null default -1,
  has_pending      boolean not null default false,
  picked_at        timestamptz not null default '-infinity',
  lease_id         uuid,
  lease_owner      text,       -- the node holding the lease
  lease_expires_at timestamptz,
  lease_ms         bigint,
  lease_from       bigint,     -- the leased range of offsets
  lease_to         bigint,
  lease_redrive    bigint,     -- the offset of a redelivered dead letter under this lease
  acked_ahead      bigint[],   -- offsets acknowledged behind an unacknowledged head
  attempts         int not null default 0,  -- the head's delivery attempts
  last_error       text,
  retry_at         timestamptz,
  constraint cursors_pkey primary key (partition_id, group_name) with (deduplicate_items = off)
) with (fillfactor = 10);
-- where pop finds work: the group's partitions that may hold something, in partition order
create index cursors_ready on ${schema}.cursors (queue_id, group_name, partition_id) where has_pending;
create index cursors_queue on ${schema}.cursors (queue_id);

create table ${schema}.dead_letters (
  id           bigint generated always as identity primary key,
  queue_id     bigint not null references ${schema}.queues(id) on delete cascade,
  partition_id bigint not null,
  "offset"     bigint not null,
  group_name   text not null,
  message_id   uuid not null,
  error        text,
  attempts     int not null,
  failed_at    timestamptz not null default now()
);
create index dead_letters_group on ${schema}.dead_letters (queue_id, group_name, id);
-- dead-letter rows follow their message: retention deletes them by (partition, offset)
create index dead_letters_message on ${schema}.dead_letters (partition_id, "offset");

-- A dead letter put back on its partition for one group: delivered to that group before the partition's next message.
create table ${schema}.redeliveries (
  partition_id bigint not null references ${schema}.partitions(id) on delete cascade,
  group_name   text not null,
  "offset"     bigint not null,
  attempts     int not null default 0,
  retry_at     timestamptz,
  primary key (partition_id, group_name, "offset")
);

-- KV: keys compare byte-wise (collation "C"), so prefix reads and keyset paging follow one order on every server.
create table ${schema}.kv (
  namespace  text collate "C" not null,
  key        text collate "C" not null,
  value      jsonb not null,            -- a stored JSON null is 'null'::jsonb, never SQL NULL
  version    bigint not null,           -- from kv_versions: a key deleted and written again never repeats a version
  expires_at timestamptz,               -- null = forever
  primary key (namespace, key)
);
-- the sweeper's index: only rows that can expire
create index kv_expires_at on ${schema}.kv (expires_at) where expires_at is not null;
create sequence ${schema}.kv_versions;

-- The answer of every KV write.
create type ${schema}.kv_result as (
  applied    boolean,
  reason     text,        -- null when applied; else exists | absent | version | limit | type
  found      boolean,     -- whether a live key exists now (after the write)
  value      jsonb,       -- its value, or null when not found
  version    bigint,      -- its version, or 0 when not found
  expires_at timestamptz  -- its expiry, or null (forever, or not found)
);

-- One row per running node: its heartbeat. A clean close deletes it; a crashed node's row stays (a day, until a
-- janitor removes it), and pop treats the leases of a node past dead_after as expired. No index besides the key: a
-- few rows, and the heartbeat's update stays HOT (fillfactor 50).
create table ${schema}.nodes (
  node_id            text primary key,
  incarnation        uuid not null,
  started_at         timestamptz not null default clock_timestamp(),
  heartbeat_at       timestamptz not null default clock_timestamp(),
  dead_after         timestamptz not null,
  session_timeout_ms bigint not null,
  version            text,
  pid                bigint
) with (fillfactor = 50);

-- One row per partition of a push whose generated message ids are not indexed: a push retried after a lost reply finds
-- what it stored by the run's first id. Removed by a janitor after pushReceiptRetention.
create table ${schema}.push_receipts (
  anchor       uuid primary key, -- the message id of the run's first item; the others differ in their low 17 bits
  partition_id bigint not null,
  first_offset bigint not null
);

-- Messages a group lost to retention (allow_drop_past_committed), per partition: how many in all, the highest offset
-- lost in the last drop, and when.
create table ${schema}.retention_losses (
  partition_id bigint not null references ${schema}.partitions(id) on delete cascade,
  group_name   text not null,
  queue_id     bigint not null,
  messages     bigint not null,
  up_to        bigint not null,
  at           timestamptz not null,
  primary key (partition_id, group_name)
);
create index retention_losses_group on ${schema}.retention_losses (queue_id, group_name);

-- Per queue, what retention's last pass saw: the oldest message kept (its partition, offset and time) and the group
-- holding it back (null when it is kept because it is young enough).
create table ${schema}.retention_state (
  queue_id         bigint primary key references ${schema}.queues(id) on delete cascade,
  oldest_at        timestamptz,
  oldest_partition text,
  oldest_offset    bigint,
  held_by          text,
  checked_at       timestamptz not null
);
