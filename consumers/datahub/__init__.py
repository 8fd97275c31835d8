"""``lineagewire consume datahub``: lineage.jobs as DataHub metadata change proposals (issue 11)."""
