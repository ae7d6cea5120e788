"""The fault benchmark's own services: a PostgreSQL cluster, a Redis server, Celery workers and beat.

Each runs on a free port under one temporary directory, so that stopping,
restarting or killing them never touches the machine's shared PostgreSQL and
Redis. Everything started here is stopped by `stop()` (the benchmark calls it
in a `finally`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import redis

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CELERY = str(Path(sys.executable).with_name("celery"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin() -> Path:
    """PostgreSQL's programs: PG_BIN when set, else the newest /usr/lib/postgresql/*/bin."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name))
    if not found:
        raise SystemExit("no PostgreSQL programs under /usr/lib/postgresql/*/bin: set PG_BIN")
    return found[-1].parent


def wait_for(predicate, timeout: float, what: str, every: float = 0.1) -> None:
    until = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > until:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


class Postgres:
    """A cluster of its own: initdb into `root`, trust auth, listening on 127.0.0.1:`port`.

    PostgreSQL refuses to run as root; as root, its programs run as the `postgres` user.
    """

    def __init__(self, root: Path, port: int, max_connections: int):
        self.root, self.port, self.bin = root, port, pg_bin()
        self.data, self.log = root / "data", root / "postgres.log"
        root.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{root}'\n"
                f"max_connections = {max_connections}\n"
            )
        self.running = False

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd=self.root)

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "start")
        self.running = True

    def stop(self) -> None:
        """Stop with fast shutdown (sessions terminated, transactions rolled back), as `pg_ctl stop -m fast`."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        self.running = False

    def restart(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", "fast", "-w", "restart")
        self.running = True

    def execute(self, sql: str) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(sql)


class Redis:
    """A redis-server of its own. With persistence, started with `--appendonly yes` (and Redis's default
    snapshots); without, as bin/services starts the machine's (`--save "" --appendonly no`)."""

    def __init__(self, root: Path, port: int, persistence: bool):
        self.root, self.port, self.persistence = root, port, persistence
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        durable = ["--appendonly", "yes"] if self.persistence else ["--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root), *durable],
            stdout=open(self.root / "redis.log", "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(self.answers, 10, "redis-server to answer")

    def answers(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.2).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        """Stop as a service manager does (SIGTERM: Redis writes what its persistence keeps, then exits)."""
        if self.proc is not None:
            _end(self.proc, timeout=30)
        self.proc = None


class CeleryProcesses:
    """Celery worker and beat processes, as docs/production/deployment.md starts them, logging under `logdir`."""

    def __init__(self, logdir: Path, env: dict[str, str]):
        self.logdir, self.env = logdir, env
        self.workers: list[subprocess.Popen] = []
        self.beat: subprocess.Popen | None = None
        self.started = 0

    def _spawn(self, name: str, app: str, args: list[str]) -> subprocess.Popen:
        return subprocess.Popen(
            [CELERY, "-A", app, *args],
            cwd=ROOT,
            env=self.env,
            stdout=open(self.logdir / f"{name}.log", "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def worker(self, threads: int) -> subprocess.Popen:
        """A worker process of `threads` threads, with the benchmark's waits (bench/fault_worker.py)."""
        self.started += 1
        name = f"w{self.started}"
        proc = self._spawn(
            name,
            "fault_worker",
            ["worker", "--pool", "threads", "--concurrency", str(threads), "-n", f"{name}@%h", "--loglevel", "INFO"],
        )
        self.workers.append(proc)
        return proc

    def wait_ready(self, timeout: float = 120) -> None:
        """Until every live worker has logged that it is ready."""

        def ready() -> bool:
            for number, proc in enumerate(self.workers, start=1):
                if proc.poll() is not None:
                    raise RuntimeError(f"worker w{number} exited:\n{self.log_text(f'w{number}')[-3000:]}")
            return all(" ready." in self.log_text(f"w{number}") for number in range(1, self.started + 1))

        wait_for(ready, timeout, "the workers to be ready", every=0.2)

    def start_beat(self) -> None:
        self.beat = self._spawn(
            "beat", "supportagent", ["beat", "--schedule", str(self.logdir / "beat-schedule"), "--loglevel", "INFO"]
        )

    def stop_beat(self) -> None:
        if self.beat is not None:
            _end(self.beat)
        self.beat = None

    def kill_worker(self, proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.workers.remove(proc)

    def log_text(self, name: str) -> str:
        path = self.logdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def worker_logs(self) -> str:
        return "".join(self.log_text(f"w{i}") for i in range(1, self.started + 1))

    def stop(self) -> None:
        _end(*self.workers, *([self.beat] if self.beat else []))
        self.workers, self.beat = [], None


def _end(*procs: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM (a warm shutdown) to each, then SIGKILL to any still running `timeout` seconds later
    (or at once when the wait is interrupted)."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    until = time.monotonic() + timeout
    try:
        for proc in procs:
            try:
                proc.wait(timeout=max(until - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
