"""The `ads` command line: the top layer, above `flows`, `tasks` and `ads_core`."""
