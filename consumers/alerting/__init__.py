"""``lineagewire consume alerting``: alerts on job status, lineage and refresh health (issue 12)."""
