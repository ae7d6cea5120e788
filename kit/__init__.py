"""The shared kit: small pieces every other package may use, tied to no part of the product.

CSV exports, money in dollars (`money`), the time zones people choose from (`timezones`),
request-size limits, the single-line check, date formats, the admin site's
common parts, run-aware logging, the text shown from a source (excerpts, the injection flag),
the error every staff or API check raises (`Refused`) and the API's error body. It imports
Django and third-party libraries only, never another package of the project.
"""
