"""Settings, read from the environment.

With no environment set the app runs on a SQLite file and executes
investigations inline. `DATABASE_URL` (PostgreSQL) and `CELERY_BROKER_URL`
(Redis) switch to the production shape. Bad values raise ImproperlyConfigured.
"""
import math
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("SUPPORTAGENT_VAR_DIR", BASE_DIR / "var"))


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    raw = env_str(name)
    if not raw:
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = env_str(name)
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {raw!r}") from None
    if value < 1:
        raise ImproperlyConfigured(f"{name} must be at least 1, got {raw!r}")
    return value


def env_choice(name: str, choices: tuple[str, ...]) -> str:
    """One of `choices` (the first when unset), case-insensitively."""
    raw = env_str(name).lower() or choices[0]
    if raw not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}; got {raw!r}")
    return raw


def env_list(name: str, default: list[str]) -> list[str]:
    raw = env_str(name)
    return [item.strip() for item in raw.split(",") if item.strip()] if raw else default


DEBUG = env_bool("DJANGO_DEBUG", True)
SECRET_KEY = env_str("DJANGO_SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off")
    SECRET_KEY = "insecure-development-key-only-for-the-embedded-demo"
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "tickets",
    "agentrun",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "supportagent.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
WSGI_APPLICATION = "supportagent.wsgi.application"


def _database() -> dict:
    url = env_str("DATABASE_URL")
    if url:
        try:
            config = dj_database_url.parse(url)
        except ValueError as exc:
            raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from exc
        if config["ENGINE"] != "django.db.backends.postgresql":
            raise ImproperlyConfigured("DATABASE_URL must point at PostgreSQL (postgres://...)")
        # Django's PostgreSQL backend, with BEGIN and COMMIT sent along with statements (supportagent.postgres).
        config["ENGINE"] = "supportagent.postgres"
        # A process shares a small pool; a run holds a connection only inside a step's
        # transaction, never while it waits for a model or a tool.
        config.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1, "max_size": env_int("DATABASE_POOL_MAX", 16), "timeout": 20,
        }
        # A worker repeats the same few statements: bound on the server and prepared
        # after 5 uses on a connection, PostgreSQL stops planning them every time.
        # Off for a pooler that cannot carry prepared statements across connections.
        if env_bool("DATABASE_PREPARED_STATEMENTS", True):
            config["OPTIONS"] |= {"server_side_binding": True, "prepare_threshold": 5}
        return config
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": env_str("SQLITE_PATH") or str(VAR_DIR / "supportagent.sqlite3"),
        # Tool dispatches read from their own thread: a file (not memory) and
        # WAL let them read while the loop writes.
        "TEST": {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")},
        "OPTIONS": {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# Celery: inline (eager) unless a broker is configured.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_DEFAULT_QUEUE = env_str("AGENT_QUEUE", "supportagent")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False


def env_float(name: str, default: float) -> float:
    raw = env_str(name)
    try:
        value = float(raw) if raw else default
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ImproperlyConfigured(f"{name} must be a finite number of seconds more than 0, got {raw!r}")
    return value


# The watchdog ends overdue runs and requeues orphaned ones; it must run often
# enough to end a run within a second of its deadline.
AGENT_WATCHDOG_INTERVAL = env_float("AGENT_WATCHDOG_INTERVAL", 0.5)
# A requeued or never-claimed run is not requeued again before this.
AGENT_QUEUED_GRACE_SECONDS = env_float("AGENT_QUEUED_GRACE_SECONDS", 20.0)
AGENT_PROBE_REDIS_URL = CELERY_BROKER_URL or "redis://127.0.0.1:6379/0"
CELERY_BEAT_SCHEDULE = {
    "watchdog": {
        "task": "agentrun.watchdog",
        "schedule": AGENT_WATCHDOG_INTERVAL,
        "options": {"expires": AGENT_WATCHDOG_INTERVAL * 4},
    },
}

# The agent. Budgets are defaults for new runs; each run stores its own copy.
AGENT_MODEL = env_str("AGENT_MODEL", "rules")
# Overrides of the contract's defaults (CONFORMANCE §2) for new runs, e.g. {"max_tool_attempts": 4}.
AGENT_BUDGET_DEFAULTS: dict = {}
# Dollars per million tokens, (input, output), per model name.
AGENT_MODEL_PRICES: dict[str, tuple[str, str]] = {
    "rules": ("0", "0"),
    "replay": ("0", "0"),
    # Provider models, "openai:<model>" / "anthropic:<model>": list prices when written; check
    # your provider's. A model not listed here needs AGENT_PRICE_* (fails closed otherwise).
    "openai:gpt-4o": ("2.50", "10.00"),
    "openai:gpt-4o-mini": ("0.15", "0.60"),
    "openai:gpt-4.1": ("2.00", "8.00"),
    "openai:gpt-4.1-mini": ("0.40", "1.60"),
    "anthropic:claude-sonnet-4-5": ("3.00", "15.00"),
    "anthropic:claude-haiku-4-5": ("1.00", "5.00"),
}
AGENT_PRICE_INPUT_PER_MTOK = env_str("AGENT_PRICE_INPUT_PER_MTOK")
AGENT_PRICE_OUTPUT_PER_MTOK = env_str("AGENT_PRICE_OUTPUT_PER_MTOK")
# Provider keys and endpoints come from the SDKs' own variables: OPENAI_API_KEY, OPENAI_BASE_URL,
# ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL. Prompts and replies are never logged unless this is
# "redacted": then the "agentrun.providers" logger (at INFO) shows them with every data block,
# the ticket's text and tool results, replaced by its size. Keys are never logged.
AGENT_LOG_PROMPTS = env_choice("AGENT_LOG_PROMPTS", ("off", "redacted"))
# How an openai:<model> request names its output cap and whether it sends parallel_tool_calls=false
# (agentrun/adapters/openai_chat.py). "auto" picks by endpoint and model; set one outright for a
# server or model that refuses the automatic choice.
AGENT_OPENAI_OUTPUT_CAP_FIELD = env_choice("AGENT_OPENAI_OUTPUT_CAP_FIELD", ("auto", "max_completion_tokens", "max_tokens"))
AGENT_OPENAI_PARALLEL_TOOL_CALLS = env_choice("AGENT_OPENAI_PARALLEL_TOOL_CALLS", ("auto", "false", "omit"))
AGENT_OPENAI_TOOL_CHOICE = env_choice("AGENT_OPENAI_TOOL_CHOICE", ("required", "omit"))
# A worker's lease on a run outlives one operation's longest wait by this much.
AGENT_LEASE_MARGIN_SECONDS = 5.0
AGENT_REQUIRE_APPROVAL: list[str] = env_list("AGENT_REQUIRE_APPROVAL", [])

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"agentrun": {"handlers": ["console"], "level": env_str("AGENT_LOG_LEVEL", "WARNING")}},
}
if AGENT_LOG_PROMPTS == "redacted":  # the redacted prompts are logged at INFO, whatever AGENT_LOG_LEVEL says
    LOGGING["loggers"]["agentrun.providers"] = {"level": "INFO"}

# Staff surfaces: the admin is the login page; ninja serves its API docs from static files (no CDN).
INSTALLED_APPS += ["ninja"]
LOGIN_URL = "admin:login"
