-- What V41's sequence of KV versions left open while a cluster is upgraded (a rolling upgrade campaign found both;
-- the first is closed here, the second is not, and why).
--
-- 1. Privileges. V41 created ${schema}.kv_versions, and every KV write draws from it. Where the application runs as a
--    role that does not own Queen's schema (it was granted the tables and sequences that existed), every kv_put,
--    kv_incr and kv_write_many of every node, old and new, failed with "permission denied for sequence kv_versions"
--    from the moment V41 committed until someone granted it by hand. Here every role that may insert into or update
--    ${schema}.kv (PUBLIC included) is granted the sequence: the migrating role owns it, so it may.
--
-- 2. Not done: a node of the version before V41, still running during the rollout, writes its once() markers with a
--    plain INSERT of the literal version 1, so a marker key deleted and created again by such a node comes back at
--    version 1, a version a client may hold from the key's first life. A trigger on kv (WHEN new.version = 1) that
--    gave such a row the sequence's next value was built and measured against the code before it, alternated:
--    once_ack_overhead 0.196-0.246 (median 0.225) with it, 0.211-0.254 without it, 0.177-0.238 (median 0.204) for the
--    code before, so this machine could not separate its cost from the noise either way. It was dropped all the same:
--    a row trigger on every marker insert, kept for good, against an ABA that needs an old node, a deleted marker and
--    a client holding the marker's first version, all within the rollout; the window closes when the last node older
--    than V41 stops.

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
