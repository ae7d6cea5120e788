"""The project: settings, URLs, the JSON API's root, the Celery and WSGI entry points, the operators' endpoints.

The top of the house: it may import every package, and none imports it.
"""

from supportagent.celery import app as celery_app

__all__ = ("celery_app",)
