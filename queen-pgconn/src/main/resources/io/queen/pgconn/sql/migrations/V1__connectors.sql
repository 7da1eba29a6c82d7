-- The connector registry, in Queen's schema: one row per connector document (queen.connectors().put). Owned by
-- queen-pgconn and migrated with the core by the node's migrator (module "pgconn"); the core knows nothing of it.
-- ${schema} is replaced by the quoted schema name.
--
-- requires functions: connectors_next_version

create table ${schema}.connectors (
  name            text primary key,
  kind            text not null,           -- source | sink
  document        jsonb not null,          -- the document as put, without its password
  password_sealed bytea,                   -- the password, AES-256-GCM under the node's key
  version         bigint not null default 1,
  updated_at      timestamptz not null default now()
);

-- Every put takes its document's version from this sequence, so a document deleted and put again never gets a
-- version a node still holds for the one before: the nodes compare versions to decide what to restart.
create sequence ${schema}.connectors_version;

-- The table hands out versions itself too: any insert, and any update that changes the version, takes the
-- sequence's next value, whoever wrote the row (a put of an earlier build wrote version + 1).
create trigger connectors_next_version before insert or update on ${schema}.connectors
  for each row execute function ${schema}.connectors_next_version();
