"""Real Celery workers (and beat) as subprocesses, on the test database and a private Redis queue."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db import connection

from engine.models import Run
from engine.statuses import TERMINAL

ROOT = Path(__file__).resolve().parents[2]
CELERY = str(Path(sys.executable).with_name("celery"))
BROKER_URL = "redis://127.0.0.1:6379/0"


def test_database_url() -> str:
    s = connection.settings_dict
    if connection.vendor != "postgresql":
        raise RuntimeError("worker tests run on PostgreSQL: set DATABASE_URL (bin/test does)")
    host = s.get("HOST") or "127.0.0.1"
    user = s.get("USER") or "postgres"
    return f"postgres://{user}@{host}:{s.get('PORT') or 5432}/{s['NAME']}"


class Cluster:
    """Workers and beat sharing one queue; logs under `logdir`."""

    def __init__(self, logdir: Path, **env: str):
        self.queue = f"test-{uuid.uuid4().hex[:10]}"
        self.logdir = logdir
        self.env = {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "CELERY_BROKER_URL": BROKER_URL,
            "AGENT_QUEUE": self.queue,
            "DJANGO_SETTINGS_MODULE": "supportagent.settings",
            "PGAPPNAME": self.queue,  # libpq names the workers' database sessions after the queue
            **env,
        }
        self.procs: list[subprocess.Popen] = []
        self.workers: dict[str, subprocess.Popen] = {}

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.logdir / f"{name}.log", "ab")
        proc = subprocess.Popen(
            [CELERY, "-A", "supportagent", *args], cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        self.procs.append(proc)
        return proc

    def worker(self, concurrency: int = 8) -> subprocess.Popen:
        name = f"w{len(self.procs)}-{self.queue}"
        self.workers[name] = self._spawn(
            name,
            [
                "worker",
                "--pool",
                "threads",
                "--concurrency",
                str(concurrency),
                "-Q",
                self.queue,
                "-n",
                f"{name}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "WARNING",
            ],
        )
        return self.workers[name]

    def wait_ready(self, app, timeout: float = 60) -> None:
        """Until every live worker answers a ping."""

        def answered():
            replies = app.control.ping(timeout=0.5) or []
            seen = {name.split("@")[0] for reply in replies for name in reply}
            return seen >= {name for name, proc in self.workers.items() if proc.poll() is None}

        wait_for(answered, timeout, "the workers to start", every=0.2)

    def beat(self) -> subprocess.Popen:
        return self._spawn(
            "beat",
            [
                "beat",
                "--schedule",
                str(self.logdir / "beat-schedule"),
                "--loglevel",
                "WARNING",
            ],
        )

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def publishing_to(app, queue: str, broker_url: str = BROKER_URL) -> Iterator[None]:
    """This process enqueues to `queue` on the test broker (or `broker_url`) instead of running tasks inline."""
    keys = ("task_always_eager", "broker_url", "task_default_queue")
    saved = {k: app.conf[k] for k in keys}
    app.conf.update(task_always_eager=False, broker_url=broker_url, task_default_queue=queue)
    _forget_connections(app)
    try:
        yield
    finally:
        app.conf.update(saved)
        _forget_connections(app)


@contextmanager
def broker_down(app) -> Iterator[None]:
    """This process publishes to a broker address where nothing listens (a refused connection)."""
    saved = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"
    _forget_connections(app)
    try:
        yield
    finally:
        app.conf.broker_url = saved
        _forget_connections(app)


def _forget_connections(app) -> None:
    # Celery builds its connection pool, queues and router from the configuration on first
    # use and keeps them; drop them so the next publish reads the configuration again.
    app._pool = None
    app.__dict__.pop("amqp", None)


def wait_for(predicate: Callable[[], object], timeout: float, what: str, every: float = 0.05):
    """Poll until `predicate()` is truthy; its value. Fails with `what` after `timeout` seconds."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def terminal(run_id: int) -> Run | None:
    """The run once it has ended (a predicate for `wait_for`), else None."""
    run = Run.objects.get(pk=run_id)
    return run if run.status in TERMINAL else None


class PrivateRedis:
    """A redis-server of this test's own, on a free port, without persistence: stopped and started at will."""

    def __init__(self, workdir: Path):
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        log = open(self.workdir / "redis.log", "ab")
        self.proc = subprocess.Popen([*args, "--dir", str(self.workdir)], stdout=log, stderr=subprocess.STDOUT)
        import redis

        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.2)
        wait_for(lambda: _answers(client), 10, "redis-server to start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # as a crash: nothing saved, clients cut off
            self.proc.wait()
        self.proc = None


def _answers(client) -> bool:
    import redis

    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
