"""The lab's settings, in the product's config style (``ads_core.config.base``): the demo, the studies, the
simulator. Every option once, with type, bounds, default and help."""
