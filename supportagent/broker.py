"""How a worker keeps its broker through an outage (CELERY_WORKER_CONSUMER and CELERY_BROKER_TRANSPORT name
the classes here).

* It tries again every AGENT_BROKER_RETRY_SECONDS, for as long as it takes. Celery's consumer reconnects
  through kombu's `ensure_connection` with its defaults: 2 s, then 2 s more each try, up to 30 s; after a
  30 s outage that kept workers away for up to 10 s after the broker was back, while runs waited. A try is
  cheap (a refused connection, or CELERY_BROKER_CONNECTION_TIMEOUT), so the workers here try at a steady pace.
* It survives losing the broker while tasks run. Closing the lost connection makes kombu's Redis channel put
  its unacknowledged messages back, and a task that ends later acknowledges its message, both through a
  connection that is already gone: kombu raises AttributeError there (not one of the connection errors
  Celery expects), and the worker stopped with "Unrecoverable error", its runs' threads with it. Here a
  channel whose connection is gone leaves its messages in Redis's unacknowledged set, which kombu restores
  after its visibility timeout; a run delivered again finds itself done or held and leaves, and the
  watchdog requeues any run whose message was lost (engine.watchdog).
"""

from __future__ import annotations

import logging
from functools import partial

from celery.worker.consumer import Consumer as CeleryConsumer
from django.conf import settings
from kombu.transport import redis

log = logging.getLogger("agentrun")


class Consumer(CeleryConsumer):
    def ensure_connected(self, conn):
        every = settings.AGENT_BROKER_RETRY_SECONDS
        conn.ensure_connection = partial(
            conn.ensure_connection, interval_start=every, interval_step=0, interval_max=every
        )
        try:
            return super().ensure_connected(conn)
        finally:
            del conn.ensure_connection  # the connection's own method again


class QoS(redis.QoS):
    """A Redis channel's unacknowledged messages; once its connection is gone, they are left to the broker."""

    def _connection_gone(self) -> bool:
        transport = self.channel.connection  # kombu clears it, or its client, as it closes the channel
        return transport is None or transport.client is None

    def ack(self, delivery_tag):
        if self._connection_gone():
            log.info(
                "a task ended after its worker lost the broker; its message is restored after the visibility timeout"
            )
            return
        super().ack(delivery_tag)

    def restore_unacked(self, client=None):
        if self._connection_gone():
            log.info("the broker was lost with tasks running; their messages are restored after the visibility timeout")
            return
        super().restore_unacked(client)


class Channel(redis.Channel):
    QoS = QoS


class RedisTransport(redis.Transport):
    Channel = Channel


class RedisWatch:
    """What a worker's watchdog asks of the Redis broker (engine.watchdog_thread.BrokerWatch).

    `elected`: one pass per interval for the whole fleet, through a key only one worker can set
    (SET NX PX); a worker that cannot reach Redis makes its own. `came_back`: Redis answers after it
    did not, or answers with another run_id (it restarted; without persistence its queue is empty).
    Each question waits at most AGENT_BROKER_PROBE_SECONDS.
    """

    def __init__(self, url: str) -> None:
        import redis as redis_client  # redis-py, which kombu's Redis transport runs on

        wait = settings.AGENT_BROKER_PROBE_SECONDS
        self.client = redis_client.Redis.from_url(url, socket_connect_timeout=wait, socket_timeout=wait)
        self.errors = (redis_client.RedisError, OSError)
        # One fleet: the workers of one database and queue (a Redis may serve several).
        database = settings.DATABASES["default"]
        self.key = (
            f"supportagent:watchdog-pass:{database.get('HOST')}:{database['NAME']}:{settings.CELERY_TASK_DEFAULT_QUEUE}"
        )
        self.seen: str | None = self._run_id()  # None: not reachable now
        self.away = self.seen is None

    def _run_id(self) -> str | None:
        try:
            return str(self.client.info("server")["run_id"])
        except self.errors:
            return None

    def came_back(self) -> bool:
        now = self._run_id()
        if now is None:
            self.away = True
            return False
        back = self.away or (self.seen is not None and now != self.seen)
        self.seen, self.away = now, False
        return back

    def elected(self, seconds: float) -> bool:
        try:
            return bool(self.client.set(self.key, "1", nx=True, px=max(int(seconds * 1000) - 50, 1)))
        except self.errors:
            return True
