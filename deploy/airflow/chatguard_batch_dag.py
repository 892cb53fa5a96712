"""Hourly chatguard batch: publish one review event per chat room that had
messages in the DAG run's data interval (Athena -> SQS review queue).

The pod runs the `batch` binary of the chatguard image with the interval as
RFC 3339 UTC bounds. The run id is derived from the window by the binary, so
an Airflow retry or a backfill of the same interval is recorded as a new
attempt of the same run in MySQL (batch_runs), and every event it publishes
carries that run id. Exit status: 0 success, 1 failed run (retried), 2 bad
usage (also retried, but will fail again: fix the configuration).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

from airflow import DAG
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from kubernetes.client import models as k8s

# Deployment-specific settings come from the Airflow environment so that the
# same file serves staging and production.
IMAGE = os.environ.get("CHATGUARD_IMAGE", "chatguard:latest")
NAMESPACE = os.environ.get("CHATGUARD_NAMESPACE", "chatguard")
SERVICE_ACCOUNT = os.environ.get("CHATGUARD_BATCH_SERVICE_ACCOUNT", "chatguard-batch")
CONFIG_MAP = os.environ.get("CHATGUARD_BATCH_CONFIG_MAP", "chatguard-batch")
SECRET = os.environ.get("CHATGUARD_BATCH_SECRET", "chatguard-batch")

# Airflow renders the interval bounds as UTC pendulum datetimes; isoformat()
# gives RFC 3339 ("2026-11-01T00:00:00+00:00").
WINDOW_START = "{{ data_interval_start.in_timezone('UTC').isoformat() }}"
WINDOW_END = "{{ data_interval_end.in_timezone('UTC').isoformat() }}"

default_args = {
    "owner": "chatguard",
    "retries": 3,
    "retry_delay": timedelta(minutes=5),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=30),
    # A window's review events must go out within the hour that follows.
    "execution_timeout": timedelta(minutes=45),
}

with DAG(
    dag_id="chatguard_batch",
    description="Athena -> SQS: one review event per chat room active in the hour",
    schedule="@hourly",
    start_date=datetime(2026, 11, 1, tzinfo=timezone.utc),
    catchup=True,  # backfills: every missed hour runs with its own window
    max_active_runs=3,  # bounds Athena and SQS load during a catch-up
    default_args=default_args,
    tags=["chatguard"],
) as dag:
    KubernetesPodOperator(
        task_id="publish_reviews",
        name="chatguard-batch",
        namespace=NAMESPACE,
        image=IMAGE,
        cmds=["/batch"],
        arguments=["--window-start", WINDOW_START, "--window-end", WINDOW_END],
        service_account_name=SERVICE_ACCOUNT,  # IRSA: Athena, S3 results, SQS
        env_from=[
            # CHATGUARD_REVIEW_QUEUE_URL, CHATGUARD_ATHENA_* ...
            k8s.V1EnvFromSource(config_map_ref=k8s.V1ConfigMapEnvSource(name=CONFIG_MAP)),
            # CHATGUARD_MYSQL_DSN
            k8s.V1EnvFromSource(secret_ref=k8s.V1SecretEnvSource(name=SECRET)),
        ],
        container_resources=k8s.V1ResourceRequirements(
            requests={"cpu": "250m", "memory": "256Mi"},
            limits={"memory": "512Mi"},
        ),
        # SIGTERM makes the binary stop its Athena query and record the
        # attempt as failed; give it time to do so before SIGKILL.
        termination_grace_period=60,
        get_logs=True,
        on_finish_action="delete_succeeded_pod",
        retries=default_args["retries"],
        retry_delay=default_args["retry_delay"],
    )
