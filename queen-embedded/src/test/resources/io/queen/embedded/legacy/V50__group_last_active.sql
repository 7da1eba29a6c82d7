-- When a consumer group was last used (a pop, an ack, a seek, or a connector that holds it), written by the nodes'
-- janitors at most once a minute per group from what each node recorded in memory. The janitor removes a named group
-- idle longer than groupIdleExpiry, so that a group nobody reads any more stops holding its queue's retention back.
-- Existing groups count as used now.
alter table ${schema}.consumer_groups add column last_active_at timestamptz not null default now();
