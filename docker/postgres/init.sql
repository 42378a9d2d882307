-- One Postgres, two databases: MLflow's backend store and Prefect's database.
-- The official postgres image runs this file once, with psql, when its data volume is empty
-- (/docker-entrypoint-initdb.d/). tests/stack/test_loopback_stack.py runs it the same way.
CREATE DATABASE mlflow;
CREATE DATABASE prefect;

-- Prefect's migrations use trigram indexes (pg_trgm). The extension is trusted since
-- PostgreSQL 13, but creating it here does not depend on the role Prefect connects with.
\connect prefect
CREATE EXTENSION IF NOT EXISTS pg_trgm;
