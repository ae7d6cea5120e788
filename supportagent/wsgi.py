import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportagent.settings")
# Staff pages ask for rare values (a state few packets are in, one ticket's ref) through statements prepared on
# pooled connections: PostgreSQL plans each for its values, and compiles none (settings: DATABASE_PLAN_CACHE_MODE,
# DATABASE_JIT).
os.environ.setdefault("DATABASE_PLAN_CACHE_MODE", "force_custom_plan")
os.environ.setdefault("DATABASE_JIT", "false")
application = get_wsgi_application()

# The embedded default (no broker, no Celery beat): this process ends runs at their deadline itself.
from engine.watchdog_thread import embedded_watchdog_start  # noqa: E402  (needs the apps loaded above)

embedded_watchdog_start()
