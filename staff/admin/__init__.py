"""The admin, split by model family; Django's autodiscovery imports this package."""
from staff.admin import runs, tickets  # noqa: F401  (registering is what importing them does)
