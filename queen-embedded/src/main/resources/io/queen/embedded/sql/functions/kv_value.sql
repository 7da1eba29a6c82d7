-- The value as jsonb, after checking its size as sent (JSON text, UTF-8): at most 64 KiB.

create or replace function ${schema}.kv_value(p_value text)
returns jsonb
language plpgsql
immutable
as $$
begin
  if p_value is null then
    raise exception 'kv: value is missing (a JSON null is the text ''null'')' using errcode = '22023';
  end if;
  if octet_length(p_value) > 65536 then
    raise exception 'kv: value is % bytes; the limit is 65536 (64 KiB)', octet_length(p_value)
      using errcode = '22023';
  end if;
  return p_value::jsonb;
end $$;
