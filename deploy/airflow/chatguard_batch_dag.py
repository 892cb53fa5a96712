"""Hourly chatguard batch: publish one review event per chat room that had
messages in the DAG run's data interval (Athena -> SQS review queue).

The pod runs the `batch` binary of the chatguard image with the interval as
RFC 3339 UTC bounds. The run id is derived from the window by the binary, so
an Airflow retry or a backfill of the same interval is recorded as a new
attempt of the same run in MySQL (batch_runs), and every event it publishes
carries that run id. Exit status: 0 success, 1 failed run (retried), 2 bad
usage (also retried, but will fail again: fix the configuration).

With real-time reviews on, the overlay's components/realtime sets
CHATGUARD_SWEEP=true in the batch's ConfigMap and the binary waits for the
hour's grace itself. An Airflow environment with CHATGUARD_BATCH_MODE=sweep
(the older way) makes the DAG pass the mode instead: a TimeDeltaSensor first waits until the hour's end plus
CHATGUARD_SWEEP_GRACE_MINUTES (default 15: the trigger's --max-delay of 5
min plus 10 for the last windows' reviews), then the pod runs `batch --sweep
--sweep-grace <the same minutes>`, which publishes only what real time did
not cover. The binary refuses (exit 1, so retried) a sweep started before
that time, so the sensor and the binary cannot disagree.

The timetable is explicit: with a cron string as `schedule`, Airflow 3 uses
CronTriggerTimetable (create_cron_data_intervals defaults to False), whose
data interval is zero-length, and every run would pass an empty window that
the binary refuses. CronDataIntervalTimetable gives each run the hour that
just ended on Airflow 2.9+ and 3.x alike.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from datetime import datetime, timedelta, timezone

try:  # Airflow 3: the Task SDK is the authoring interface.
    from airflow.sdk import DAG
except ImportError:  # Airflow 2.9+
    from airflow import DAG

try:  # Airflow 3.x releases that export timetables from the SDK.
    from airflow.sdk import CronDataIntervalTimetable
except ImportError:  # Airflow 2.9+ and early 3.x
    from airflow.timetables.interval import CronDataIntervalTimetable

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from kubernetes.client import models as k8s

log = logging.getLogger(__name__)

# The image's user (distroless "nonroot"); the namespace enforces the
# restricted Pod Security Standard, which refuses a pod that may run as root.
NONROOT = 65532

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_VERSION_TAG = re.compile(r":v?[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+_-]*$")


def pinned_image(ref: str) -> str:
    """Return ref if it names one build: by digest (REPO@sha256:...) or by a
    version tag (REPO:v1.4.0). Raise ValueError otherwise, so that a DAG that
    would run whatever `latest` is today fails to load, visibly, instead."""
    ref = (ref or "").strip()
    if not ref:
        raise ValueError("CHATGUARD_IMAGE is not set: give the chatguard image by digest or version tag")
    if _DIGEST.search(ref) or _VERSION_TAG.search(ref.rsplit("/", 1)[-1]):
        return ref
    raise ValueError(
        f"CHATGUARD_IMAGE={ref!r} is not pinned: use REPO@sha256:<digest> or REPO:<version>, never latest"
    )


_LAUNCH_HOUR = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:00(:00)?(Z|[+-]00:00)$")


def launch_hour(value: str) -> datetime:
    """Return the DAG's start_date from CHATGUARD_DAG_START: a whole UTC hour
    in RFC 3339 (2026-12-01T09:00:00Z), the hour of the launch. The first
    run covers the hour that starts there. Raise ValueError otherwise, so a
    DAG without a deliberate start fails to load instead of picking one:
    with a start in the past, every hour since would be a run of its own
    as soon as anyone backfills or turns catch-up on, each reviewed by the
    models (published_at is the publish time, so --max-age expires none)."""
    value = (value or "").strip()
    if not value:
        raise ValueError("CHATGUARD_DAG_START is not set: give the launch hour, e.g. 2026-12-01T09:00:00Z")
    if not _LAUNCH_HOUR.match(value):
        raise ValueError(f"CHATGUARD_DAG_START={value!r} is not a whole UTC hour like 2026-12-01T09:00:00Z")
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc)


# Deployment-specific settings come from the Airflow environment so that the
# same file serves every environment. The image is the one the Kustomize
# overlay pins (deploy/README.md, "Upgrade").
IMAGE = pinned_image(os.environ.get("CHATGUARD_IMAGE", ""))
START = launch_hour(os.environ.get("CHATGUARD_DAG_START", ""))
NAMESPACE = os.environ.get("CHATGUARD_NAMESPACE", "chatguard")
SERVICE_ACCOUNT = os.environ.get("CHATGUARD_BATCH_SERVICE_ACCOUNT", "chatguard-batch")
CONFIG_MAP = os.environ.get("CHATGUARD_BATCH_CONFIG_MAP", "chatguard-batch")
SECRET = os.environ.get("CHATGUARD_BATCH_SECRET", "chatguard-batch")

_MODES = ("batch", "sweep")


def batch_mode(value: str) -> str:
    """Return the DAG's mode from CHATGUARD_BATCH_MODE: "batch" (the
    default: one review event per active room and hour) or "sweep" (real
    time's sweeper). Raise ValueError otherwise, so that a typo fails the
    DAG's load instead of silently publishing every room every hour."""
    value = (value or "").strip() or "batch"
    if value not in _MODES:
        raise ValueError(f"CHATGUARD_BATCH_MODE={value!r} is not one of {', '.join(_MODES)}")
    return value


def sweep_grace_minutes(value: str) -> int:
    """Return CHATGUARD_SWEEP_GRACE_MINUTES (default 15), whole minutes in
    0..1440, the binary's --sweep-grace bounds. Raise ValueError otherwise."""
    value = (value or "").strip() or "15"
    if not value.isdigit() or int(value) > 1440:
        raise ValueError(f"CHATGUARD_SWEEP_GRACE_MINUTES={value!r} is not whole minutes in 0..1440")
    return int(value)


def time_delta_sensor():
    """The TimeDeltaSensor class: from the standard provider on Airflow 3,
    from airflow.sensors on Airflow 2.9+. It waits until the run's data
    interval end plus its delta."""
    try:
        from airflow.providers.standard.sensors.time_delta import TimeDeltaSensor
    except ImportError:
        from airflow.sensors.time_delta import TimeDeltaSensor
    return TimeDeltaSensor


MODE = batch_mode(os.environ.get("CHATGUARD_BATCH_MODE", ""))
SWEEP_GRACE_MINUTES = sweep_grace_minutes(os.environ.get("CHATGUARD_SWEEP_GRACE_MINUTES", ""))

# Airflow renders the interval bounds as UTC pendulum datetimes; isoformat()
# gives RFC 3339 ("2026-11-01T00:00:00+00:00").
WINDOW_START = "{{ data_interval_start.in_timezone('UTC').isoformat() }}"
WINDOW_END = "{{ data_interval_end.in_timezone('UTC').isoformat() }}"
ARGUMENTS = ["--window-start", WINDOW_START, "--window-end", WINDOW_END]
if MODE == "sweep":
    ARGUMENTS += ["--sweep", "--sweep-grace", f"{SWEEP_GRACE_MINUTES}m"]

# Each run covers the hour that ended when it starts: the run at 06:00 UTC
# publishes [05:00, 06:00).
SCHEDULE = CronDataIntervalTimetable("@hourly", timezone="UTC")


def on_failure(context):
    """on_failure_callback of the batch task (after its last retry): logs the
    failed window and hands the context to the hook named by the environment
    variable CHATGUARD_FAILURE_CALLBACK ("package.module:function"), e.g. a
    pager or chat notifier. A hook that cannot be imported or that raises is
    logged, never re-raised: a broken notifier must not hide the task's own
    failure, nor fail the callback machinery."""
    ti = context.get("task_instance") or context.get("ti")
    log.error(
        "chatguard batch failed: dag_run=%s window=%s..%s try=%s",
        getattr(context.get("dag_run"), "run_id", None),
        context.get("data_interval_start"),
        context.get("data_interval_end"),
        getattr(ti, "try_number", None),
    )
    spec = os.environ.get("CHATGUARD_FAILURE_CALLBACK", "").strip()
    if not spec:
        return
    try:
        module, _, name = spec.partition(":")
        if not module or not name:
            raise ValueError("expected package.module:function")
        hook = getattr(importlib.import_module(module), name)
        hook(context)
    except Exception:  # noqa: BLE001 - see the docstring
        log.exception("chatguard batch: failure callback %r failed", spec)


default_args = {
    "owner": "chatguard",
    "retries": 3,
    "retry_delay": timedelta(minutes=5),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=30),
    # A window's review events must go out within the hour that follows.
    "execution_timeout": timedelta(minutes=45),
    "on_failure_callback": on_failure,
}

with DAG(
    dag_id="chatguard_batch",
    description=(
        "Athena -> SQS: one review event per chat room active in the hour"
        if MODE == "batch"
        else "Athena + MySQL -> SQS: the parts of the hour real time did not cover"
    ),
    schedule=SCHEDULE,
    start_date=START,
    # No implicit catch-up (Airflow 2 defaults to True): enabling the DAG,
    # or re-enabling it after a pause, runs only the latest hour. Missed
    # hours are published on purpose with a backfill (README.md, "Backfill").
    catchup=False,
    max_active_runs=3,  # bounds Athena and SQS load during a backfill
    default_args=default_args,
    tags=["chatguard"],
) as dag:
    publish = KubernetesPodOperator(
        task_id="publish_reviews",
        name="chatguard-batch",
        namespace=NAMESPACE,
        image=IMAGE,
        cmds=["/batch"],
        arguments=ARGUMENTS,
        service_account_name=SERVICE_ACCOUNT,  # IRSA: Athena, S3 results, SQS
        # The egress NetworkPolicies of the namespace select pods by these
        # labels (deploy/k8s/base/network-egress.yaml): without them the
        # pod reaches nothing, not even DNS.
        labels={"app.kubernetes.io/name": "chatguard", "app.kubernetes.io/component": "batch"},
        env_from=[
            # Every CHATGUARD_* setting of the batch (deploy/k8s/base/config/batch.env).
            k8s.V1EnvFromSource(config_map_ref=k8s.V1ConfigMapEnvSource(name=CONFIG_MAP)),
        ],
        env_vars=[
            k8s.V1EnvVar(
                name="CHATGUARD_MYSQL_DSN",
                value_from=k8s.V1EnvVarSource(
                    secret_key_ref=k8s.V1SecretKeySelector(name=SECRET, key="mysql-dsn"),
                ),
            ),
        ],
        security_context=k8s.V1PodSecurityContext(
            run_as_non_root=True,
            run_as_user=NONROOT,
            run_as_group=NONROOT,
            seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
        ),
        container_security_context=k8s.V1SecurityContext(
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            capabilities=k8s.V1Capabilities(drop=["ALL"]),
        ),
        container_resources=k8s.V1ResourceRequirements(
            requests={"cpu": "250m", "memory": "256Mi"},
            limits={"cpu": "1", "memory": "512Mi"},
        ),
        # SIGTERM makes the binary stop its Athena query and record the
        # attempt as failed; give it time to do so before SIGKILL.
        termination_grace_period=60,
        get_logs=True,
        on_finish_action="delete_succeeded_pod",
        retries=default_args["retries"],
        retry_delay=default_args["retry_delay"],
    )
    if MODE == "sweep":
        # Wait, without holding a worker slot, until the hour's end plus the
        # grace, so that real time's last windows of the hour have fired and
        # been reviewed before the sweep reads what they covered.
        wait = time_delta_sensor()(
            task_id="wait_for_sweep_grace",
            delta=timedelta(minutes=SWEEP_GRACE_MINUTES),
            mode="reschedule",
            poke_interval=60,
            timeout=timedelta(minutes=SWEEP_GRACE_MINUTES) + timedelta(hours=1),
        )
        wait >> publish
