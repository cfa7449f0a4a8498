"""coldkeep.db: the one SQLite database of an archive. Each table is owned by one
module here, and only ``manifest`` holds the connection; the layers above reach
a table through the module that owns it (its statements, its row types).

    schema         the migrations that build every table; the version check
    manifest       the connection; entries, restore_intents, verify_state
    passlog        passes
    audit          audit
    legalholds     legal_holds
    remoteobjects  remote_objects, remote_state
    restoredrows   event_holds
    checkpointlog  checkpoints
    jobruns        job_runs, job_state
    alertqueue     alerts, alert_deliveries
    stats          stats
    expiry         expired_months, expiring

The module map (docs/architecture.md) says more of each.
"""
