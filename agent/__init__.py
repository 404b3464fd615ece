"""finagent domain code: no Celery imports here."""
