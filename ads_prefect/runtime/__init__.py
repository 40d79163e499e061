"""The Prefect runtime of a build: what runs around the flows, not in them.

`runner` runs a build from the command line (signals, the temporary server, lock settings, crash marking, exit
codes); `runs` marks a flow run Crashed and links to its page; `prefect_env` decides Prefect's environment
without importing Prefect; `server` starts and stops the temporary server; `dask` and `dask_worker` the shard map
on Dask; `api_routing` keeps each task run on its own build's API; `progress` the bars of this process. Below the
flows and tasks; `ads_core` never imports it.
"""
