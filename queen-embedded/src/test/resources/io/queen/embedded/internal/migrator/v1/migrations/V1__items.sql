-- requires functions: items_stamp
create table ${schema}.items (id int primary key, note text, stamped boolean not null default false);
create trigger items_stamp before insert on ${schema}.items for each row execute function ${schema}.items_stamp();
