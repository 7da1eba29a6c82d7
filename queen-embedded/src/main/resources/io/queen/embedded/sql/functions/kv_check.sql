-- Checks a KV namespace (1..128 bytes of [A-Za-z0-9._:-]) and key (1..512 bytes); raises 22023 otherwise. The
-- namespace test is written as a length and "no character outside the set": an anchored pattern with a bounded
-- repeat costs about 30 times more in PostgreSQL's regex engine, on every KV write.

create or replace function ${schema}.kv_check(p_ns text, p_key text)
returns void
language plpgsql
immutable
as $$
begin
  if p_ns is null or octet_length(p_ns) < 1 or octet_length(p_ns) > 128 or p_ns ~ '[^A-Za-z0-9._:-]' then
    raise exception 'kv: namespace % is invalid: allowed is [A-Za-z0-9._:-]{1,128}',
      coalesce(quote_literal(left(p_ns, 64)), 'null') using errcode = '22023';
  end if;
  if p_key is null or octet_length(p_key) < 1 or octet_length(p_key) > 512 then
    raise exception 'kv: key must be 1..512 bytes, was % bytes', coalesce(octet_length(p_key), 0)
      using errcode = '22023';
  end if;
end $$;
