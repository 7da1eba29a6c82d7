alter table ${schema}.items add column size int not null default 0;
