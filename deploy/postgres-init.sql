-- Run once by the db service on an empty volume (POSTGRES_DB made the registry's database already):
-- the alert store gets a database of its own, owned by the same user.
CREATE DATABASE alerting OWNER lineagewire;
