"""ADS pipeline core library: plain, typed stage functions (no Prefect here)."""

__version__ = "0.1.0"
