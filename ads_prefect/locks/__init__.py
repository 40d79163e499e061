"""Build locks with fencing tokens: one build at a time per OUT, and a build that lost its lock publishes nothing.

`manager` holds a lock for a whole build (`owning`) and renews its lease; `store` is the lock store interface and
its folder implementation (and the lock settings); `objectstore` the same in an object store with conditional
writes; `place` picks the store of an OUT; `fence` checks, right before every publish, that the build's token is
still the newest. Below the flows and tasks; `ads_core` never imports it.
"""
