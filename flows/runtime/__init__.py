"""Prefect plumbing the flows stand on: the stage runner (one cached stage, its record), the
JSON-only result storage, the cross-process stage locks and store leases, the UI monitor,
server-outage handling, the object store attach, and device dispatch (which devices, one
worker process per device group, `sago-shard` deployment runs, `sago server-setup`). Flows
import from here; nothing here knows a stage or imports a flow."""
