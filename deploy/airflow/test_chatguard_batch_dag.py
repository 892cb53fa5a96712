"""Tests of chatguard_batch_dag.py with the standard library only.

Airflow is not installed here, so the DAG file is loaded against minimal
stand-ins for the few Airflow and Kubernetes classes it uses. The stand-ins
accept only the keyword arguments the real classes have, so a misspelt
argument fails here as it would in Airflow. The file is loaded three times,
once per import layout: Airflow 3 with timetables in airflow.sdk, Airflow 3
with timetables only in airflow.timetables, and Airflow 2.9+.

Run: python3 -B -m unittest discover -s deploy/airflow -p 'test_*.py'
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import sys
import types
import unittest
from datetime import datetime, timedelta, timezone
from pathlib import Path
from unittest import mock

HERE = Path(__file__).resolve().parent
DAG_FILE = HERE / "chatguard_batch_dag.py"
PINNED = "registry.example.com/chatguard:v1.4.0"
LAUNCH = "2026-12-01T09:00:00Z"

# RFC 3339 date-time with an explicit offset, as the batch binary parses it.
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def strict(name, allowed):
    """A stand-in class that records its keyword arguments and refuses any
    the real class does not take."""

    def __init__(self, *args, **kwargs):
        unknown = set(kwargs) - allowed
        if unknown:
            raise TypeError(f"{name}() got unexpected keyword arguments {sorted(unknown)}")
        self.args = args
        self.kwargs = kwargs
        for k, v in kwargs.items():
            setattr(self, k, v)

    return type(name, (), {"__init__": __init__})


# The kubernetes client models the DAG builds, with their real attributes.
K8S_MODELS = {
    "V1EnvFromSource": {"config_map_ref", "prefix", "secret_ref"},
    "V1ConfigMapEnvSource": {"name", "optional"},
    "V1EnvVar": {"name", "value", "value_from"},
    "V1EnvVarSource": {"config_map_key_ref", "field_ref", "file_key_ref", "resource_field_ref", "secret_key_ref"},
    "V1SecretKeySelector": {"key", "name", "optional"},
    "V1PodSecurityContext": {
        "app_armor_profile", "fs_group", "fs_group_change_policy", "run_as_group", "run_as_non_root",
        "run_as_user", "se_linux_change_policy", "se_linux_options", "seccomp_profile",
        "supplemental_groups", "supplemental_groups_policy", "sysctls", "windows_options",
    },
    "V1SeccompProfile": {"localhost_profile", "type"},
    "V1SecurityContext": {
        "allow_privilege_escalation", "app_armor_profile", "capabilities", "privileged", "proc_mount",
        "read_only_root_filesystem", "run_as_group", "run_as_non_root", "run_as_user",
        "se_linux_options", "seccomp_profile", "windows_options",
    },
    "V1Capabilities": {"add", "drop"},
    "V1ResourceRequirements": {"claims", "limits", "requests"},
}

BASE_OPERATOR_ARGS = {
    "task_id", "owner", "retries", "retry_delay", "retry_exponential_backoff", "max_retry_delay",
    "execution_timeout", "on_failure_callback", "on_retry_callback", "on_success_callback", "pool",
    "queue", "priority_weight", "depends_on_past", "email", "email_on_failure", "doc_md",
}
POD_OPERATOR_ARGS = BASE_OPERATOR_ARGS | {
    "namespace", "image", "name", "random_name_suffix", "cmds", "arguments", "ports", "volume_mounts",
    "volumes", "env_vars", "env_from", "secrets", "in_cluster", "cluster_context", "labels",
    "reattach_on_restart", "startup_timeout_seconds", "get_logs", "container_logs", "image_pull_policy",
    "annotations", "container_resources", "affinity", "config_file", "node_selector",
    "image_pull_secrets", "service_account_name", "hostnetwork", "tolerations", "security_context",
    "container_security_context", "dnspolicy", "schedulername", "full_pod_spec", "init_containers",
    "log_events_on_failure", "do_xcom_push", "pod_template_file", "priority_class_name",
    "termination_grace_period", "on_finish_action", "active_deadline_seconds", "deferrable",
}
SENSOR_ARGS = BASE_OPERATOR_ARGS | {"delta", "mode", "poke_interval", "timeout", "soft_fail", "exponential_backoff"}
DAG_ARGS = {
    "dag_id", "description", "schedule", "start_date", "end_date", "catchup", "max_active_runs",
    "max_active_tasks", "default_args", "tags", "doc_md", "dagrun_timeout", "params",
}


class UTCDateTime(datetime):
    """The little of pendulum.DateTime the DAG's templates use."""

    def in_timezone(self, tz):
        if tz != "UTC":
            raise ValueError(f"stand-in supports UTC only, not {tz!r}")
        return self.astimezone(timezone.utc)


def hourly_interval(run_after: datetime) -> tuple[UTCDateTime, UTCDateTime]:
    """The data interval CronDataIntervalTimetable("@hourly") gives the run
    scheduled at run_after: the full hour that ended then."""
    end = run_after.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=1)
    return UTCDateTime.fromtimestamp(start.timestamp(), timezone.utc), UTCDateTime.fromtimestamp(end.timestamp(), timezone.utc)


def render(template: str, context: dict) -> str:
    """Render the {{ ... }} expressions of an Airflow template. The DAG's
    expressions are plain Python attribute calls, which eval can evaluate
    without Jinja."""

    def one(m):
        return str(eval(m.group(1), {"__builtins__": {}}, context))  # noqa: S307 - our own template

    return re.sub(r"\{\{\s*(.*?)\s*\}\}", one, template)


class Airflow:
    """Installs stand-in Airflow and kubernetes modules for one import layout
    and loads the DAG file against them."""

    def __init__(self, layout: str):
        self.layout = layout
        self.operators = []
        self.sensors = []
        self.dags = []
        airflow = types.ModuleType("airflow")
        airflow.__path__ = []
        dag_cls = self._dag_class()
        timetable = self._timetable_class()
        modules = {"airflow": airflow}
        if layout in ("3-sdk", "3.0"):
            sdk = types.ModuleType("airflow.sdk")
            sdk.DAG = dag_cls
            if layout == "3-sdk":
                sdk.CronDataIntervalTimetable = timetable
            modules["airflow.sdk"] = sdk
        else:
            airflow.DAG = dag_cls
        interval = types.ModuleType("airflow.timetables.interval")
        interval.CronDataIntervalTimetable = timetable
        modules["airflow.timetables"] = types.ModuleType("airflow.timetables")
        modules["airflow.timetables.interval"] = interval
        pod = types.ModuleType("airflow.providers.cncf.kubernetes.operators.pod")
        operators = self.operators
        base = strict("KubernetesPodOperator", POD_OPERATOR_ARGS)

        class KubernetesPodOperator(base):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                operators.append(self)

        pod.KubernetesPodOperator = KubernetesPodOperator
        for name in ("airflow.providers", "airflow.providers.cncf", "airflow.providers.cncf.kubernetes",
                     "airflow.providers.cncf.kubernetes.operators"):
            modules[name] = types.ModuleType(name)
        modules["airflow.providers.cncf.kubernetes.operators.pod"] = pod
        # TimeDeltaSensor: the standard provider's on Airflow 3, airflow's
        # own on 2.9. Only one layout's module exists, as in real installs.
        sensors = self.sensors
        sensor_base = strict("TimeDeltaSensor", SENSOR_ARGS)

        class TimeDeltaSensor(sensor_base):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.downstream = []
                sensors.append(self)

            def __rshift__(self, other):
                self.downstream.append(other)
                return other

        time_delta = types.ModuleType("time_delta")
        time_delta.TimeDeltaSensor = TimeDeltaSensor
        if layout in ("3-sdk", "3.0"):
            for name in ("airflow.providers.standard", "airflow.providers.standard.sensors"):
                modules[name] = types.ModuleType(name)
            modules["airflow.providers.standard.sensors.time_delta"] = time_delta
        else:
            modules["airflow.sensors"] = types.ModuleType("airflow.sensors")
            modules["airflow.sensors.time_delta"] = time_delta
        models = types.ModuleType("kubernetes.client.models")
        for name, allowed in K8S_MODELS.items():
            setattr(models, name, strict(name, allowed))
        client = types.ModuleType("kubernetes.client")
        client.models = models
        modules["kubernetes"] = types.ModuleType("kubernetes")
        modules["kubernetes.client"] = client
        modules["kubernetes.client.models"] = models
        self.modules = modules
        self.timetable = timetable

    def _dag_class(self):
        dags = self.dags
        base = strict("DAG", DAG_ARGS)

        class DAG(base):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                dags.append(self)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        return DAG

    @staticmethod
    def _timetable_class():
        class CronDataIntervalTimetable:
            def __init__(self, cron, timezone):
                self.cron = cron
                self.timezone = timezone

        return CronDataIntervalTimetable

    def load(self, env: dict | None = None):
        """Import the DAG file afresh with these stand-ins and environment."""
        environ = {"CHATGUARD_IMAGE": PINNED, "CHATGUARD_DAG_START": LAUNCH}
        environ.update(env or {})
        name = f"chatguard_batch_dag_{self.layout.replace('.', '_').replace('-', '_')}"
        spec = importlib.util.spec_from_file_location(name, DAG_FILE)
        module = importlib.util.module_from_spec(spec)
        present = {k: v for k, v in environ.items() if v is not None}
        with mock.patch.dict(sys.modules, self.modules), mock.patch.dict(os.environ, present):
            for k, v in environ.items():
                if v is None:
                    os.environ.pop(k, None)
            spec.loader.exec_module(module)
        return module


LAYOUTS = ("3-sdk", "3.0", "2.9")


class DagTest(unittest.TestCase):
    def setUp(self):
        sys.dont_write_bytecode = True

    def test_pod_gets_a_one_hour_rfc3339_window(self):
        for layout in LAYOUTS:
            with self.subTest(layout=layout):
                af = Airflow(layout)
                af.load()
                self.assertEqual(len(af.dags), 1)
                self.assertEqual(len(af.operators), 1)
                self.assertEqual(af.sensors, [], "the hourly batch waits for nothing")
                dag, op = af.dags[0], af.operators[0]

                # The timetable gives data intervals; a cron string would
                # give Airflow 3's zero-length ones.
                self.assertIsInstance(dag.schedule, af.timetable)
                self.assertEqual(dag.schedule.cron, "@hourly")
                self.assertEqual(dag.schedule.timezone, "UTC")
                self.assertIs(dag.catchup, False, "no implicit catch-up: missed hours are a deliberate backfill")

                # The run Airflow schedules at 06:00 UTC covers [05:00, 06:00).
                start, end = hourly_interval(datetime(2026, 11, 1, 6, 0, 7, tzinfo=timezone.utc))
                args = [render(a, {"data_interval_start": start, "data_interval_end": end}) for a in op.arguments]
                self.assertEqual(args[0], "--window-start")
                self.assertEqual(args[2], "--window-end")
                self.assertEqual(len(args), 4)
                for v in (args[1], args[3]):
                    self.assertRegex(v, RFC3339)
                ws, we = datetime.fromisoformat(args[1]), datetime.fromisoformat(args[3])
                self.assertEqual(ws, datetime(2026, 11, 1, 5, 0, tzinfo=timezone.utc))
                self.assertEqual(we - ws, timedelta(hours=1))
                self.assertEqual(ws.utcoffset(), timedelta(0), "the window is passed in UTC")
                self.assertEqual(op.cmds, ["/batch"])

    def test_sweep_mode_waits_for_the_grace_and_passes_it(self):
        # The sweep runs after the hour's end plus the grace (the sensor
        # waits from the data interval's end), and the binary is told the
        # same grace, so it never refuses a run the DAG started on time.
        for layout in LAYOUTS:
            for env, minutes in (({"CHATGUARD_BATCH_MODE": "sweep"}, 15),
                                 ({"CHATGUARD_BATCH_MODE": " sweep ", "CHATGUARD_SWEEP_GRACE_MINUTES": "25"}, 25)):
                with self.subTest(layout=layout, minutes=minutes):
                    af = Airflow(layout)
                    af.load(env)
                    (op,), (sensor,) = af.operators, af.sensors
                    self.assertEqual(sensor.delta, timedelta(minutes=minutes))
                    self.assertEqual(sensor.mode, "reschedule", "no worker slot held while waiting")
                    self.assertGreater(sensor.timeout, sensor.delta)
                    self.assertEqual(sensor.downstream, [op])
                    self.assertEqual(af.dags[0].schedule.cron, "@hourly")
                    start, end = hourly_interval(datetime(2026, 11, 1, 6, 0, 7, tzinfo=timezone.utc))
                    args = [render(a, {"data_interval_start": start, "data_interval_end": end}) for a in op.arguments]
                    self.assertEqual(args[4:], ["--sweep", "--sweep-grace", f"{minutes}m"])
                    self.assertEqual(datetime.fromisoformat(args[3]), datetime(2026, 11, 1, 6, 0, tzinfo=timezone.utc))
        # The DAG's default grace is the binary's.
        config = (HERE.parent.parent / "cmd" / "batch" / "config.go").read_text()
        self.assertRegex(config, r"const DefaultSweepGrace = 15 \* time\.Minute")
        af = Airflow("2.9")
        af.load({"CHATGUARD_BATCH_MODE": "batch"})
        self.assertEqual(af.sensors, [])
        self.assertEqual(len(af.operators[0].arguments), 4, "batch mode passes the window only, as before")
        for env, what in (({"CHATGUARD_BATCH_MODE": "sweeper"}, "CHATGUARD_BATCH_MODE"),
                          ({"CHATGUARD_BATCH_MODE": "sweep", "CHATGUARD_SWEEP_GRACE_MINUTES": "15m"}, "CHATGUARD_SWEEP_GRACE_MINUTES"),
                          ({"CHATGUARD_BATCH_MODE": "sweep", "CHATGUARD_SWEEP_GRACE_MINUTES": "1441"}, "CHATGUARD_SWEEP_GRACE_MINUTES"),
                          ({"CHATGUARD_BATCH_MODE": "sweep", "CHATGUARD_SWEEP_GRACE_MINUTES": "-5"}, "CHATGUARD_SWEEP_GRACE_MINUTES")):
            with self.subTest(env=env):
                with self.assertRaisesRegex(ValueError, what):
                    Airflow("3-sdk").load(env)

    def test_interval_in_another_zone_is_passed_in_utc(self):
        af = Airflow("3-sdk")
        af.load()
        op = af.operators[0]
        cet = timezone(timedelta(hours=1))
        start = UTCDateTime(2026, 11, 1, 7, 0, tzinfo=cet)
        ctx = {"data_interval_start": start, "data_interval_end": UTCDateTime(2026, 11, 1, 8, 0, tzinfo=cet)}
        self.assertEqual(render(op.arguments[1], ctx), "2026-11-01T06:00:00+00:00")
        self.assertEqual(render(op.arguments[3], ctx), "2026-11-01T07:00:00+00:00")

    def test_pod_is_wired_like_the_manifests(self):
        af = Airflow("2.9")
        af.load()
        op = af.operators[0]
        self.assertEqual(op.image, PINNED)
        self.assertEqual(op.namespace, "chatguard")
        self.assertEqual(op.service_account_name, "chatguard-batch")
        # The labels the egress NetworkPolicies select the batch pod by.
        egress = (HERE.parent / "k8s" / "base" / "network-egress.yaml").read_text()
        self.assertEqual(op.labels, {"app.kubernetes.io/name": "chatguard", "app.kubernetes.io/component": "batch"})
        self.assertRegex(egress, r"name: chatguard-egress-aws\n(.*\n){5}\s+values: \[[^\]]*\bbatch\b")
        self.assertEqual([e.config_map_ref.name for e in op.env_from], ["chatguard-batch"])
        (dsn,) = op.env_vars
        self.assertEqual(dsn.name, "CHATGUARD_MYSQL_DSN")
        self.assertEqual((dsn.value_from.secret_key_ref.name, dsn.value_from.secret_key_ref.key), ("chatguard-batch", "mysql-dsn"))
        # The namespace enforces the restricted Pod Security Standard.
        sc, csc = op.security_context, op.container_security_context
        self.assertTrue(sc.run_as_non_root)
        self.assertEqual((sc.run_as_user, sc.run_as_group), (65532, 65532))
        self.assertEqual(sc.seccomp_profile.type, "RuntimeDefault")
        self.assertFalse(csc.allow_privilege_escalation)
        self.assertTrue(csc.read_only_root_filesystem)
        self.assertEqual(csc.capabilities.drop, ["ALL"])
        self.assertEqual(set(op.container_resources.limits), {"cpu", "memory"})
        # The ConfigMap keeps that name in the Kustomize base.
        kust = (HERE.parent / "k8s" / "base" / "kustomization.yaml").read_text()
        self.assertRegex(kust, r"- name: chatguard-batch\n\s+envs: \[config/batch\.env\]\n\s+options:\n\s+disableNameSuffixHash: true")

    def test_image_must_be_pinned(self):
        ok = [
            "registry.example.com/chatguard:v1.4.0",
            "registry.example.com:5000/team/chatguard:1.4.0-rc.1",
            "registry.example.com/chatguard@sha256:" + "a" * 64,
            "registry.example.com/chatguard:v1.4.0@sha256:" + "0" * 64,
        ]
        bad = [
            "", "chatguard", "chatguard:latest", "registry.example.com:5000/chatguard",
            "registry.example.com/chatguard:main", "registry.example.com/chatguard@sha256:abc",
        ]
        for image in ok:
            with self.subTest(image=image):
                af = Airflow("3-sdk")
                af.load({"CHATGUARD_IMAGE": image})
                self.assertEqual(af.operators[0].image, image)
        for image in bad:
            with self.subTest(image=image):
                with self.assertRaisesRegex(ValueError, "CHATGUARD_IMAGE"):
                    Airflow("3-sdk").load({"CHATGUARD_IMAGE": image})
        with self.assertRaisesRegex(ValueError, "not set"):
            Airflow("3-sdk").load({"CHATGUARD_IMAGE": None})

    def test_start_is_the_launch_hour_and_nothing_is_caught_up(self):
        # Enabling the DAG runs the hours from the launch on, never the
        # month before it: start_date is the configured launch hour and
        # catch-up is off (Airflow 2 would default it on).
        for layout in LAYOUTS:
            with self.subTest(layout=layout):
                af = Airflow(layout)
                af.load()
                dag = af.dags[0]
                self.assertEqual(dag.start_date, datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc))
                self.assertEqual(dag.start_date.utcoffset(), timedelta(0))
                self.assertIs(dag.catchup, False)
        for ok, want in (("2026-12-01T09:00Z", datetime(2026, 12, 1, 9, tzinfo=timezone.utc)),
                         ("2027-01-31T23:00:00+00:00", datetime(2027, 1, 31, 23, tzinfo=timezone.utc))):
            with self.subTest(start=ok):
                af = Airflow("2.9")
                af.load({"CHATGUARD_DAG_START": ok})
                self.assertEqual(af.dags[0].start_date, want)
        # Not a whole UTC hour, or missing: the DAG does not load.
        for bad in ("2026-12-01T09:30:00Z", "2026-12-01T09:00:00+01:00", "2026-12-01", "yesterday", "  "):
            with self.subTest(start=bad):
                with self.assertRaisesRegex(ValueError, "CHATGUARD_DAG_START"):
                    Airflow("3-sdk").load({"CHATGUARD_DAG_START": bad})
        with self.assertRaisesRegex(ValueError, "not set"):
            Airflow("3-sdk").load({"CHATGUARD_DAG_START": None})

    def test_backfill_and_provider_are_documented(self):
        # Missed hours are a deliberate command, and the provider's minimum
        # version is the one the requirements file pins.
        readme = (HERE / "README.md").read_text()
        reqs = (HERE / "requirements.txt").read_text()
        (pin,) = re.findall(r"^apache-airflow-providers-cncf-kubernetes>=([0-9.]+)$", reqs, re.M)
        self.assertIn(f"apache-airflow-providers-cncf-kubernetes>={pin}", readme)
        self.assertIn("airflow backfill create --dag-id chatguard_batch", readme)
        self.assertIn("airflow dags backfill", readme)
        self.assertIn("CHATGUARD_DAG_START", readme)

    def test_failure_callback_hook(self):
        af = Airflow("3-sdk")
        dag_module = af.load()
        callback = af.dags[0].default_args["on_failure_callback"]
        self.assertIs(callback, dag_module.on_failure)
        context = {"data_interval_start": "s", "data_interval_end": "e", "task_instance": types.SimpleNamespace(try_number=4)}

        # No hook configured: it only logs.
        with mock.patch.dict(os.environ, {"CHATGUARD_FAILURE_CALLBACK": ""}):
            with self.assertLogs(dag_module.log, logging.ERROR) as logs:
                callback(context)
        self.assertIn("window=s..e try=4", logs.output[0])

        # A configured hook gets the context.
        seen = []
        hooks = types.ModuleType("chatguard_test_hooks")
        hooks.page = seen.append
        hooks.broken = lambda ctx: 1 / 0
        with mock.patch.dict(sys.modules, {"chatguard_test_hooks": hooks}):
            with mock.patch.dict(os.environ, {"CHATGUARD_FAILURE_CALLBACK": "chatguard_test_hooks:page"}):
                with self.assertLogs(dag_module.log, logging.ERROR):
                    callback(context)
            self.assertEqual(seen, [context])

            # A broken or missing hook is logged, never raised.
            for spec in ("chatguard_test_hooks:broken", "chatguard_test_hooks:missing", "no_such_module:f", "no-colon"):
                with self.subTest(spec=spec):
                    with mock.patch.dict(os.environ, {"CHATGUARD_FAILURE_CALLBACK": spec}):
                        with self.assertLogs(dag_module.log, logging.ERROR) as logs:
                            callback(context)
                    self.assertTrue(any("failure callback" in line for line in logs.output), logs.output)


if __name__ == "__main__":
    unittest.main()
