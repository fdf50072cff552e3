#!/bin/sh
# Creates Temporal's two Postgres databases (persistence and visibility) when missing and brings their schemas to
# the version the server needs; safe to run again, and again after an upgrade of temporal-sql-tool (which carries
# the schemas of its release). docker-compose.yml runs it in the temporalio/admin-tools container; the
# production-topology test and `baton dev --topology production` run it with the temporal-sql-tool Baton builds.
#
# Connection: SQL_HOST, SQL_PORT, SQL_USER, SQL_PASSWORD (read by temporal-sql-tool itself);
# database names: DBNAME (default temporal) and VISIBILITY_DBNAME (default temporal_visibility).
set -eu
SQL_PLUGIN=postgres12
export SQL_PLUGIN

for pair in "${DBNAME:-temporal}:temporal" "${VISIBILITY_DBNAME:-temporal_visibility}:visibility"; do
  db=${pair%%:*}
  schema=${pair##*:}
  echo "temporal schema: database $db ($schema)"
  # create-database succeeds when the database exists already; setup-schema only adds the version tables.
  temporal-sql-tool --db "$db" create-database
  temporal-sql-tool --db "$db" setup-schema -v 0.0
  temporal-sql-tool --db "$db" update-schema --schema-name "postgresql/v12/$schema"
done
echo "temporal schema: up to date"
