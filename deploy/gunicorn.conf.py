"""Gunicorn's settings for the web process (`gunicorn -c deploy/gunicorn.conf.py supportagent.wsgi`).

Options given on the command line win over these (the browser test binds its own port that way).
"""

import os

# Behind the proxy that terminates TLS (nginx, a load balancer) on the same machine; it alone talks to the world.
bind = "127.0.0.1:8000"

# Threads, not only processes: a request mostly waits (on PostgreSQL, on the operator's services while the evidence
# is re-checked, up to AGENT_RECHECK_TIMEOUT), and a waiting thread costs far less than a waiting process. One
# process per core keeps the cores busy; WEB_CONCURRENCY (gunicorn's usual variable) sets another count. Each process
# holds a database pool of up to DATABASE_POOL_MAX connections (16), more than its threads ever use at once.
worker_class = "gthread"
workers = int(os.environ.get("WEB_CONCURRENCY") or os.cpu_count() or 2)
threads = 4

# No staff page or API call takes more than a few seconds (the re-check is capped at 3 s): a request still running
# after 30 s is stuck, and gunicorn replaces its process. On a restart, requests in flight get as long to finish.
timeout = 30
graceful_timeout = 30

# One line per request on stdout (the journal under systemd), errors on stderr.
accesslog = "-"
errorlog = "-"


def child_exit(server, worker):
    """With several processes behind /metrics (PROMETHEUS_MULTIPROC_DIR set, docs/production/monitoring.md), a
    process that ends leaves its gauge files behind: mark them dead so the sum no longer counts them."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
