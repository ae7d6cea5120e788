import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "supportagent.settings")
application = get_wsgi_application()

# The embedded default (no broker, no Celery beat): this process ends runs at their deadline itself.
from engine.watchdog_thread import embedded_watchdog_start  # noqa: E402  (needs the apps loaded above)

embedded_watchdog_start()
