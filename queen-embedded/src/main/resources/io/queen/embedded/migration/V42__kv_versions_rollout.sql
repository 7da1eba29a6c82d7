-- What V41's sequence of KV versions left open while a cluster is upgraded (a rolling upgrade campaign found both).
--
-- 1. Privileges. V41 created ${schema}.kv_versions, and every KV write draws from it. Where the application runs as a
--    role that does not own Queen's schema (it was granted the tables and sequences that existed), every kv_put,
--    kv_incr and kv_write_many of every node, old and new, failed with "permission denied for sequence kv_versions"
--    from the moment V41 committed until someone granted it by hand. Here every role that may insert into or update
--    ${schema}.kv (PUBLIC included) is granted the sequence: the migrating role owns it, so it may.
--
-- 2. Markers of the previous version. A node of the version before V41, still running during the rollout, writes its
--    once() markers with a plain INSERT of the literal version 1 (V41's margin keeps its kv_put from the sequence's
--    range, not this). A marker key deleted and created again that way came back at version 1, a version a client may
--    hold from the key's first life. A trigger gives such a row the sequence's next value instead; its WHEN clause is
--    tested in the executor, without calling the function, so the writes of this version pay nothing for it. They
--    never write version 1: a sequence nothing has drawn from yet (an empty store at V41) is moved on to 2 first.

do $grants$
declare
  r record;
begin
  -- the roles granted INSERT or UPDATE on kv, and kv's owner (who may write it without a grant, and need not own the
  -- sequence: a schema created by the application's role and migrated by another); not the sequence's own owner
  for r in
    select distinct case when x.role = 0 then 'public' else quote_ident(g.rolname) end as who
      from (select a.grantee as role
              from pg_class c cross join lateral aclexplode(c.relacl) a
             where c.oid = '${schema}.kv'::regclass and a.privilege_type in ('INSERT', 'UPDATE')
            union
            select c.relowner from pg_class c where c.oid = '${schema}.kv'::regclass) x
      left join pg_roles g on g.oid = x.role
     where x.role <> (select relowner from pg_class where oid = '${schema}.kv_versions'::regclass)
  loop
    execute format('grant usage, select, update on sequence %s.kv_versions to %s', '${schema}', r.who);
  end loop;
end
$grants$;

select setval('${schema}.kv_versions', 2, false) from ${schema}.kv_versions where not is_called;

create function ${schema}.kv_version_from_sequence() returns trigger
language plpgsql
as $$
begin
  new.version := nextval('${schema}.kv_versions');
  return new;
end
$$;

create trigger kv_version_from_sequence before insert on ${schema}.kv
  for each row when (new.version = 1) execute function ${schema}.kv_version_from_sequence();
