from django.apps import AppConfig


class AgentrunConfig(AppConfig):
    name = "agentrun"
    default_auto_field = "django.db.models.BigAutoField"
