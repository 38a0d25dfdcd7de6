"""A throwaway PostgreSQL server for one test (Debian's packages, `/usr/lib/postgresql/<n>/bin`),
the database Debezium's connector captures changes from.

`initdb` writes a new cluster into the test's directory, trusting local connections for the
superuser `postgres`; the server listens on a free 127.0.0.1 port, with `wal_level=logical` so
logical decoding (the pgoutput plugin) has what it needs. PostgreSQL refuses to run as root: run
as root, the tests run it as the `postgres` user (`runuser -u postgres --`) in a directory of
that user's own under the system's temporary directory, removed afterwards. The server is
stopped by its PID (the one in `postmaster.pid`): SIGINT, PostgreSQL's fast shutdown.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from .cluster import LOOPBACK, free_port
from .kafka_jvm import _missing
from .support import wait_until

POSTGRES_ROOT = Path("/usr/lib/postgresql")
SYSTEM_USER = "postgres"
SUPERUSER = "postgres"
STOP_TIMEOUT_S = 30.0


def postgres_bin_dir() -> Path:
    """The `bin` directory of the newest PostgreSQL installed from Debian's packages."""
    found = sorted(
        (path.parent for path in POSTGRES_ROOT.glob("*/bin/postgres")),
        key=lambda directory: int(directory.parent.name) if directory.parent.name.isdigit() else 0,
    )
    if not found:
        _missing(f"PostgreSQL is not installed in {POSTGRES_ROOT} (Debian package postgresql)")
    return found[-1]


class PostgresServer:
    """One PostgreSQL server; `start()` creates its cluster and waits until it answers."""

    def __init__(self, directory: Path) -> None:
        self.bin_dir = postgres_bin_dir()
        self.as_root = os.geteuid() == 0
        self._scratch: Path | None = None
        self._test_directory = directory
        if self.as_root:  # the test's directory is root's alone: the server gets one of its own
            self._scratch = Path(tempfile.mkdtemp(prefix="moldau-postgres-"))
            shutil.chown(self._scratch, SYSTEM_USER, SYSTEM_USER)
            directory = self._scratch
        self.data_dir = directory / "postgres-data"
        self.log_path = directory / "postgres.log"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The server's own PID (under runuser, `process` is runuser's)."""
        return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])

    def _as_server_user(self, command: list[str]) -> list[str]:
        return ["runuser", "-u", SYSTEM_USER, "--", *command] if self.as_root else command

    def start(self) -> PostgresServer:
        subprocess.run(
            self._as_server_user(
                [
                    str(self.bin_dir / "initdb"),
                    "--pgdata",
                    str(self.data_dir),
                    "--username",
                    SUPERUSER,
                    "--auth",
                    "trust",
                    "--encoding",
                    "UTF8",
                    "--locale",
                    "C.UTF-8",
                    "--no-sync",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        settings = {
            "listen_addresses": LOOPBACK,
            "port": str(self.port),
            "unix_socket_directories": "",
            "wal_level": "logical",
            "max_wal_senders": "4",
            "max_replication_slots": "4",
            "fsync": "off",  # a test's database outlives no crash of its own
        }
        arguments = [str(self.bin_dir / "postgres"), "-D", str(self.data_dir)]
        for name, value in settings.items():
            arguments += ["-c", f"{name}={value}"]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self._as_server_user(arguments),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_until(self._answers, timeout=60, message=f"PostgreSQL on port {self.port}")
        return self

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"PostgreSQL exited: {self.log_path.read_text()[-3000:]}")
        completed = subprocess.run(
            [str(self.bin_dir / "pg_isready"), "-h", LOOPBACK, "-p", str(self.port), "-q"],
            timeout=30,
        )
        return completed.returncode == 0

    def psql(self, sql: str, *, database: str = "postgres") -> str:
        """Run `sql` (statements, psql's unaligned tuples-only output) and return its output;
        the first error fails the test."""
        completed = subprocess.run(
            [
                str(self.bin_dir / "psql"),
                "--host",
                LOOPBACK,
                "--port",
                str(self.port),
                "--username",
                SUPERUSER,
                "--dbname",
                database,
                "--no-psqlrc",
                "--quiet",
                "--tuples-only",
                "--no-align",
                "--set",
                "ON_ERROR_STOP=1",
                "--file",
                "-",
            ],
            input=sql.encode(),
            capture_output=True,
            timeout=120,
        )
        if completed.returncode != 0:
            raise AssertionError(f"psql failed: {completed.stderr.decode()[-3000:]}")
        return completed.stdout.decode()

    def stop(self) -> None:
        """SIGINT to the server's PID (fast shutdown: clients are disconnected), then a clean
        exit within STOP_TIMEOUT_S; the scratch directory of a root run is removed."""
        try:
            if self.process is not None and self.process.poll() is None:
                os.kill(self.pid, signal.SIGINT)
                try:
                    code = self.process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    os.kill(self.pid, signal.SIGKILL)
                    self.process.wait()
                    raise AssertionError(
                        f"PostgreSQL did not stop within {STOP_TIMEOUT_S:.0f} s of SIGINT"
                    ) from None
                assert code == 0, f"PostgreSQL exited {code}: {self.log_path.read_text()[-3000:]}"
        finally:
            self.process = None
            if self._scratch is not None:
                if self.log_path.exists():  # kept with the test's other logs
                    shutil.copy(self.log_path, self._test_directory / self.log_path.name)
                shutil.rmtree(self._scratch, ignore_errors=True)
