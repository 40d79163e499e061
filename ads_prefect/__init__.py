"""Prefect flows and tasks over `ads_core`. Importing it changes nothing in the process: what a run needs set up
(log filters, the API routing of Prefect's services) is applied by the entry points (`ads_prefect.runtime.setup`)."""
