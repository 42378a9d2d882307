# MLflow tracking server with a Postgres backend store.
# The upstream image has no Postgres driver; psycopg2-binary is the usual one-line addition, at
# the version uv.lock gives the `server` extra (the one the loopback stack test runs MLflow with)
# (add boto3 as well for S3/MinIO artifact stores). Build context: docker/ (nothing is copied).
FROM ghcr.io/mlflow/mlflow:v3.17.2
RUN pip install --no-cache-dir "psycopg2-binary==2.9.13"
