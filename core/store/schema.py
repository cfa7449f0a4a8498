"""coldkeep.db's schema: the migrations that build every table of it, in order,
and the version check each open makes before anything is written.

Invariants:
- The schema is versioned by ``PRAGMA user_version``: version N is the first N
  migrations. A migration released is never edited; a change is a new one,
  appended.
- Each migration runs as one script, in one transaction with its version bump
  (``migration_scripts``): a crash mid-migration leaves the previous version
  intact.
- A database from a newer coldkeep is refused, never downgraded; a read-only
  open of an older one is refused too (it would need migrating first).
- Every table of coldkeep.db is created here, whichever module of ``store``
  owns its statements.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

MIGRATIONS: tuple[str, ...] = (
    # 1: entries, passes, restore intents
    """
    CREATE TABLE entries (
        id              INTEGER PRIMARY KEY,
        unit            TEXT    NOT NULL,
        relpath         TEXT    NOT NULL,             -- relative to live_root
        bytes           INTEGER NOT NULL,
        sha256          TEXT    NOT NULL,
        gz_path         TEXT    NOT NULL UNIQUE,      -- relative to archive_root
        gz_bytes        INTEGER NOT NULL,
        mtime_ns        INTEGER NOT NULL,
        dev             INTEGER,
        ino             INTEGER,
        mode            INTEGER NOT NULL,
        archived_at     INTEGER NOT NULL,             -- ms since the epoch
        status          TEXT    NOT NULL DEFAULT 'archived'
                        CHECK (status IN ('archived', 'stale', 'restored', 'missing')),
        hold_until      INTEGER,                      -- ms since the epoch
        source_present  INTEGER NOT NULL DEFAULT 1    -- step 7 not yet confirmed
    );
    CREATE INDEX entries_relpath ON entries (relpath);
    CREATE INDEX entries_unit ON entries (unit);
    CREATE INDEX entries_sha256 ON entries (sha256);
    CREATE INDEX entries_source_present ON entries (source_present) WHERE source_present = 1;
    CREATE TABLE passes (
        id           INTEGER PRIMARY KEY,
        started_at   INTEGER NOT NULL,
        finished_at  INTEGER,
        mode         TEXT    NOT NULL,
        origin       TEXT    NOT NULL,
        status       TEXT    NOT NULL DEFAULT 'running'
                     CHECK (status IN ('running', 'ok', 'failed', 'cancelled')),
        summary      TEXT                             -- JSON
    );
    CREATE TABLE restore_intents (
        id          INTEGER PRIMARY KEY,
        entry_id    INTEGER,
        target      TEXT    NOT NULL,                 -- absolute path of the file
        created_at  INTEGER NOT NULL
    );
    """,
    # 2: the live checkpoint log, restore holds on event rows
    """
    CREATE TABLE checkpoints (
        id            INTEGER PRIMARY KEY,
        at            INTEGER NOT NULL,               -- ms since the epoch
        mode          TEXT    NOT NULL,
        busy          INTEGER NOT NULL,
        log           INTEGER NOT NULL,
        checkpointed  INTEGER NOT NULL,
        ms            REAL    NOT NULL,
        wal_before    INTEGER NOT NULL,
        wal_after     INTEGER NOT NULL,
        error         TEXT
    );
    CREATE TABLE event_holds (
        row_id      INTEGER PRIMARY KEY,              -- the live events table's id
        hold_until  INTEGER NOT NULL                  -- ms since the epoch
    );
    """,
    # 3: verify marks and the resumable verify cursor
    """
    ALTER TABLE entries ADD COLUMN verified_at INTEGER;   -- ms since the epoch
    ALTER TABLE entries ADD COLUMN verify_error TEXT;     -- the last verify's failure
    CREATE TABLE verify_state (
        id             INTEGER PRIMARY KEY CHECK (id = 1),
        cursor         INTEGER NOT NULL,              -- the last entry id checked
        round_started  INTEGER NOT NULL               -- ms since the epoch
    );
    CREATE INDEX entries_verify_error ON entries (verify_error) WHERE verify_error IS NOT NULL;
    """,
    # 4: status counts and the entries needing attention, without reading every row
    """
    CREATE INDEX entries_status ON entries (status, bytes, gz_bytes);
    """,
    # 5: the scheduler's runs and state, alerts and their deliveries, the operator
    # audit, and the stats time series
    """
    CREATE TABLE job_runs (
        id          INTEGER PRIMARY KEY,
        job         TEXT    NOT NULL,
        trigger     TEXT    NOT NULL,                 -- schedule | boot | manual
        started_at  INTEGER NOT NULL,                 -- ms since the epoch
        ended_at    INTEGER,
        status      TEXT    NOT NULL DEFAULT 'running'
                    CHECK (status IN ('running', 'ok', 'error', 'timeout', 'cancelled')),
        error       TEXT,
        summary     TEXT                              -- JSON
    );
    CREATE INDEX job_runs_job ON job_runs (job, started_at);
    CREATE TABLE job_state (
        job          TEXT PRIMARY KEY,
        last_run_at  INTEGER                          -- the last SUCCESSFUL run's start
    );
    CREATE TABLE alerts (
        id          INTEGER PRIMARY KEY,
        key         TEXT    NOT NULL UNIQUE,          -- one alert per condition
        kind        TEXT    NOT NULL,
        message     TEXT    NOT NULL,
        payload     TEXT    NOT NULL,                 -- JSON
        created_at  INTEGER NOT NULL
    );
    CREATE TABLE alert_deliveries (
        alert_id    INTEGER NOT NULL REFERENCES alerts (id),
        sink        TEXT    NOT NULL,
        sent_at     INTEGER,
        attempts    INTEGER NOT NULL DEFAULT 0,
        last_error  TEXT,
        PRIMARY KEY (alert_id, sink)
    );
    CREATE TABLE audit (
        id       INTEGER PRIMARY KEY,
        at       INTEGER NOT NULL,
        user     TEXT    NOT NULL,
        host     TEXT    NOT NULL,
        pid      INTEGER NOT NULL,
        origin   TEXT    NOT NULL,                    -- cli | console | scheduler
        action   TEXT    NOT NULL,
        args     TEXT    NOT NULL,                    -- JSON
        outcome  TEXT    NOT NULL DEFAULT 'running',
        detail   TEXT
    );
    CREATE TABLE stats (
        at          INTEGER NOT NULL,
        entries     INTEGER NOT NULL,
        bytes       INTEGER NOT NULL,
        gz_bytes    INTEGER NOT NULL,
        backlog_files INTEGER NOT NULL,
        backlog_bytes INTEGER NOT NULL,
        backlog_rows  INTEGER NOT NULL
    );
    """,
    # 6: a pass whose process died is settled as 'interrupted' by the next recovery;
    # a scheduled job can be 'waiting' for another of its scheduler's jobs to let go
    # of the archive lock. SQLite cannot widen a CHECK in place: both tables are
    # copied into new ones.
    """
    CREATE TABLE passes_6 (
        id           INTEGER PRIMARY KEY,
        started_at   INTEGER NOT NULL,
        finished_at  INTEGER,
        mode         TEXT    NOT NULL,
        origin       TEXT    NOT NULL,
        status       TEXT    NOT NULL DEFAULT 'running'
                     CHECK (status IN ('running', 'ok', 'failed', 'cancelled', 'interrupted')),
        summary      TEXT                             -- JSON
    );
    INSERT INTO passes_6 SELECT id, started_at, finished_at, mode, origin, status, summary
        FROM passes;
    DROP TABLE passes;
    ALTER TABLE passes_6 RENAME TO passes;
    CREATE TABLE job_runs_6 (
        id          INTEGER PRIMARY KEY,
        job         TEXT    NOT NULL,
        trigger     TEXT    NOT NULL,                 -- schedule | boot | manual
        started_at  INTEGER NOT NULL,                 -- ms since the epoch (queued)
        ended_at    INTEGER,
        status      TEXT    NOT NULL DEFAULT 'running'
                    CHECK (status IN ('waiting', 'running', 'ok', 'error', 'timeout',
                                      'cancelled')),
        error       TEXT,
        summary     TEXT                              -- JSON
    );
    INSERT INTO job_runs_6 SELECT id, job, trigger, started_at, ended_at, status, error, summary
        FROM job_runs;
    DROP TABLE job_runs;
    ALTER TABLE job_runs_6 RENAME TO job_runs;
    CREATE INDEX job_runs_job ON job_runs (job, started_at);
    """,
    # 7: bundle members. An entry's gzip may be one member of a bundle (a tar of
    # small files' gzips): gz_path names the bundle, member_offset and
    # member_length where its gzip lies in it (NULL for a gzip of its own). A
    # gzip path is then unique only with its offset; SQLite cannot drop a UNIQUE
    # constraint in place, so the table is copied.
    """
    CREATE TABLE entries_7 (
        id              INTEGER PRIMARY KEY,
        unit            TEXT    NOT NULL,
        relpath         TEXT    NOT NULL,             -- relative to live_root
        bytes           INTEGER NOT NULL,
        sha256          TEXT    NOT NULL,
        gz_path         TEXT    NOT NULL,             -- relative to archive_root
        gz_bytes        INTEGER NOT NULL,
        mtime_ns        INTEGER NOT NULL,
        dev             INTEGER,
        ino             INTEGER,
        mode            INTEGER NOT NULL,
        archived_at     INTEGER NOT NULL,             -- ms since the epoch
        status          TEXT    NOT NULL DEFAULT 'archived'
                        CHECK (status IN ('archived', 'stale', 'restored', 'missing')),
        hold_until      INTEGER,                      -- ms since the epoch
        source_present  INTEGER NOT NULL DEFAULT 1,   -- step 7 not yet confirmed
        verified_at     INTEGER,
        verify_error    TEXT,
        member_offset   INTEGER,                      -- in the bundle gz_path names
        member_length   INTEGER
    );
    INSERT INTO entries_7 SELECT id, unit, relpath, bytes, sha256, gz_path, gz_bytes,
        mtime_ns, dev, ino, mode, archived_at, status, hold_until, source_present,
        verified_at, verify_error, NULL, NULL FROM entries;
    DROP TABLE entries;
    ALTER TABLE entries_7 RENAME TO entries;
    CREATE UNIQUE INDEX entries_location ON entries (gz_path, coalesce(member_offset, -1));
    CREATE INDEX entries_relpath ON entries (relpath);
    CREATE INDEX entries_unit ON entries (unit);
    CREATE INDEX entries_sha256 ON entries (sha256);
    CREATE INDEX entries_source_present ON entries (source_present) WHERE source_present = 1;
    CREATE INDEX entries_verify_error ON entries (verify_error) WHERE verify_error IS NOT NULL;
    CREATE INDEX entries_status ON entries (status, bytes, gz_bytes);
    """,
    # 8: the remote tier. One row per object shipped, recorded only once the
    # server's size and checksum matched; a local copy's drop is recorded here
    # before it is unlinked, and the unlink confirmed after. An event month's
    # snapshots carry the month and the local database's size and mtime when it
    # was taken (shipped again on change).
    """
    CREATE TABLE remote_objects (
        path          TEXT    PRIMARY KEY,            -- under archive_root and <prefix>/<site>/
        bytes         INTEGER NOT NULL,
        sha256        TEXT    NOT NULL,
        shipped_at    INTEGER NOT NULL,               -- ms since the epoch
        verified_at   INTEGER,                        -- the last verify --remote that read it
        verify_error  TEXT,
        local_gone_at INTEGER,                        -- the local copy's drop recorded
        local_present INTEGER NOT NULL DEFAULT 1,     -- its unlink not yet confirmed
        month         TEXT,                           -- an event month's snapshot: YYYY-MM
        source_sig    TEXT                            -- its database's size:mtime_ns
    ) WITHOUT ROWID;
    CREATE INDEX remote_objects_gone ON remote_objects (local_gone_at, local_present)
        WHERE local_gone_at IS NOT NULL;
    CREATE INDEX remote_objects_month ON remote_objects (month) WHERE month IS NOT NULL;
    CREATE TABLE remote_state (
        id             INTEGER PRIMARY KEY CHECK (id = 1),
        verify_cursor  TEXT    NOT NULL               -- the last path verify --remote read
    );
    """,
    # 9: retention and legal holds. An entry past its retention is marked
    # 'expired' (its sha256 and gz_path kept as a tombstone, with when) before
    # its gzip goes; an event month's database likewise in expired_months. The
    # status CHECK cannot change in place, so entries is copied once more.
    """
    CREATE TABLE entries_9 (
        id              INTEGER PRIMARY KEY,
        unit            TEXT    NOT NULL,
        relpath         TEXT    NOT NULL,             -- relative to live_root
        bytes           INTEGER NOT NULL,
        sha256          TEXT    NOT NULL,
        gz_path         TEXT    NOT NULL,             -- relative to archive_root
        gz_bytes        INTEGER NOT NULL,
        mtime_ns        INTEGER NOT NULL,
        dev             INTEGER,
        ino             INTEGER,
        mode            INTEGER NOT NULL,
        archived_at     INTEGER NOT NULL,             -- ms since the epoch
        status          TEXT    NOT NULL DEFAULT 'archived'
                        CHECK (status IN ('archived', 'stale', 'restored', 'missing',
                                          'expired')),
        hold_until      INTEGER,                      -- ms since the epoch
        source_present  INTEGER NOT NULL DEFAULT 1,   -- step 7 not yet confirmed
        verified_at     INTEGER,
        verify_error    TEXT,
        member_offset   INTEGER,                      -- in the bundle gz_path names
        member_length   INTEGER,
        expired_at      INTEGER                       -- ms since the epoch
    );
    INSERT INTO entries_9 SELECT id, unit, relpath, bytes, sha256, gz_path, gz_bytes,
        mtime_ns, dev, ino, mode, archived_at, status, hold_until, source_present,
        verified_at, verify_error, member_offset, member_length, NULL FROM entries;
    DROP TABLE entries;
    ALTER TABLE entries_9 RENAME TO entries;
    CREATE UNIQUE INDEX entries_location ON entries (gz_path, coalesce(member_offset, -1));
    CREATE INDEX entries_relpath ON entries (relpath);
    CREATE INDEX entries_unit ON entries (unit);
    CREATE INDEX entries_sha256 ON entries (sha256);
    CREATE INDEX entries_source_present ON entries (source_present) WHERE source_present = 1;
    CREATE INDEX entries_verify_error ON entries (verify_error) WHERE verify_error IS NOT NULL;
    CREATE INDEX entries_status ON entries (status, bytes, gz_bytes);
    CREATE TABLE expired_months (
        month       TEXT    PRIMARY KEY,              -- YYYY-MM
        bytes       INTEGER NOT NULL,                 -- its database's size
        sha256      TEXT    NOT NULL,
        expired_at  INTEGER NOT NULL                  -- ms since the epoch
    ) WITHOUT ROWID;
    CREATE TABLE expiring (                           -- recorded, its files not yet gone
        path        TEXT    PRIMARY KEY               -- under archive_root
    ) WITHOUT ROWID;
    CREATE TABLE legal_holds (
        id           INTEGER PRIMARY KEY,
        scope        TEXT    NOT NULL CHECK (scope IN ('unit', 'path', 'entry')),
        target       TEXT    NOT NULL,                -- a unit, a glob, an entry id
        reason       TEXT    NOT NULL,
        until        INTEGER,                         -- ms since the epoch; NULL: until released
        placed_at    INTEGER NOT NULL,
        placed_by    TEXT    NOT NULL,
        released_at  INTEGER,
        released_by  TEXT
    );
    """,
    # 10: event months against the remote tier. Each month snapshot's rows; and
    # each local month database's rows as the last ship counted them, which every
    # manifest snapshot carries: what a rebuild from the bucket cannot give back.
    """
    ALTER TABLE remote_objects ADD COLUMN row_count INTEGER;  -- a month snapshot's rows
    CREATE TABLE event_months (
        month       TEXT    PRIMARY KEY,              -- YYYY-MM
        row_count   INTEGER NOT NULL,                 -- rows in its local database
        source_sig  TEXT    NOT NULL,                 -- the database's size:mtime_ns then
        counted_at  INTEGER NOT NULL                  -- ms since the epoch
    ) WITHOUT ROWID;
    """,
    # 11: a source's ctime beside its mtime (a rewrite whose mtime was put back
    # still moves it; NULL in entries written before it); and the files a pass
    # could not settle, each with its reason and remedy, until it is settled.
    """
    ALTER TABLE entries ADD COLUMN ctime_ns INTEGER;        -- the source's, when archived
    CREATE TABLE file_problems (
        relpath      TEXT    PRIMARY KEY,             -- relative to live_root
        kind         TEXT    NOT NULL,                -- what failed (docs/json.md)
        reason       TEXT    NOT NULL,                -- the error, one line
        remedy       TEXT    NOT NULL,                -- what the operator does about it
        first_seen   INTEGER NOT NULL,                -- ms since the epoch
        last_seen    INTEGER NOT NULL,
        first_pass   INTEGER,                         -- passes.id
        last_pass    INTEGER,
        times        INTEGER NOT NULL DEFAULT 1       -- passes that met it
    ) WITHOUT ROWID;
    """,
    # 12: an entry's seek points (codec.encode_points: where raw inflate can start
    # inside its gzip), written in the same row as the entry; NULL when its gzip
    # has none past the start (a small file, or a gzip written before them).
    """
    ALTER TABLE entries ADD COLUMN seek_points TEXT;
    """,
    # 13: the entries archived in a span of time (a trend's last days, what an
    # interrupted pass had done) as a range of an index, not a scan of them all:
    # the span stays days while the archive grows for years.
    """
    CREATE INDEX entries_archived_at ON entries (archived_at);
    """,
    # 14: what status, the console, the ship and recovery read at every start,
    # kept by the database itself, so that reading it costs the same at
    # 10,000,000 entries as at 1,000. Each entry's ``remote`` mark says where its
    # gzip has copies (0 here only, 1 here and remote, 2 remote only: its local
    # copy dropped); the entries' totals are kept per status and mark, the
    # remote objects' totals in one row; two partial indexes hold the kept
    # entries not shipped yet (the backlog to ship) and those whose gzip should
    # be here (what recovery expects on disk). Triggers keep them whatever
    # statement writes an entry or a remote object; an entry's insert runs its
    # two steps in one trigger, in order (its totals, then its mark, which moves
    # them). A later migration that rebuilds the entries table must create its
    # triggers again.
    """
    ALTER TABLE entries ADD COLUMN remote INTEGER NOT NULL DEFAULT 0;  -- 0, 1, 2: above
    UPDATE entries SET remote = (
        SELECT 1 + (local_gone_at IS NOT NULL) FROM remote_objects WHERE path = gz_path
    ) WHERE gz_path IN (SELECT path FROM remote_objects);
    CREATE INDEX entries_unshipped ON entries (gz_path, archived_at, gz_bytes, status, remote)
        WHERE remote = 0 AND status IN ('archived', 'stale', 'restored');
    CREATE INDEX entries_local ON entries (gz_path, status, remote)
        WHERE remote < 2 AND status IN ('archived', 'stale', 'restored');

    CREATE TABLE entry_totals (
        status   TEXT    NOT NULL,
        remote   INTEGER NOT NULL,
        entries  INTEGER NOT NULL,
        bytes    INTEGER NOT NULL,
        gz_bytes INTEGER NOT NULL,
        PRIMARY KEY (status, remote)
    ) WITHOUT ROWID;
    INSERT INTO entry_totals
        SELECT status, remote, count(*), coalesce(sum(bytes), 0), coalesce(sum(gz_bytes), 0)
        FROM entries GROUP BY status, remote;
    CREATE TRIGGER entry_in AFTER INSERT ON entries BEGIN
        INSERT INTO entry_totals VALUES
            (NEW.status, NEW.remote, 1, coalesce(NEW.bytes, 0), coalesce(NEW.gz_bytes, 0))
        ON CONFLICT (status, remote) DO UPDATE SET entries = entries + 1,
            bytes = bytes + excluded.bytes, gz_bytes = gz_bytes + excluded.gz_bytes;
        UPDATE entries SET remote = (
            SELECT 1 + (local_gone_at IS NOT NULL) FROM remote_objects WHERE path = NEW.gz_path
        ) WHERE id = NEW.id AND EXISTS (SELECT 1 FROM remote_objects WHERE path = NEW.gz_path);
    END;
    CREATE TRIGGER entry_out AFTER DELETE ON entries BEGIN
        UPDATE entry_totals SET entries = entries - 1, bytes = bytes - coalesce(OLD.bytes, 0),
            gz_bytes = gz_bytes - coalesce(OLD.gz_bytes, 0)
        WHERE status = OLD.status AND remote = OLD.remote;
    END;
    CREATE TRIGGER entry_change AFTER UPDATE OF status, bytes, gz_bytes, remote ON entries
    BEGIN
        UPDATE entry_totals SET entries = entries - 1, bytes = bytes - coalesce(OLD.bytes, 0),
            gz_bytes = gz_bytes - coalesce(OLD.gz_bytes, 0)
        WHERE status = OLD.status AND remote = OLD.remote;
        INSERT INTO entry_totals VALUES
            (NEW.status, NEW.remote, 1, coalesce(NEW.bytes, 0), coalesce(NEW.gz_bytes, 0))
        ON CONFLICT (status, remote) DO UPDATE SET entries = entries + 1,
            bytes = bytes + excluded.bytes, gz_bytes = gz_bytes + excluded.gz_bytes;
    END;
    CREATE TRIGGER entry_moved AFTER UPDATE OF gz_path ON entries BEGIN
        UPDATE entries SET remote = coalesce((
            SELECT 1 + (local_gone_at IS NOT NULL) FROM remote_objects WHERE path = NEW.gz_path
        ), 0) WHERE id = NEW.id;
    END;

    CREATE TRIGGER remote_object_in AFTER INSERT ON remote_objects BEGIN
        UPDATE entries SET remote = 1 + (NEW.local_gone_at IS NOT NULL) WHERE gz_path = NEW.path;
    END;
    CREATE TRIGGER remote_object_out AFTER DELETE ON remote_objects BEGIN
        UPDATE entries SET remote = 0 WHERE gz_path = OLD.path;
    END;
    CREATE TRIGGER remote_object_change AFTER UPDATE OF path, local_gone_at ON remote_objects
    BEGIN
        UPDATE entries SET remote = 0 WHERE gz_path = OLD.path;
        UPDATE entries SET remote = 1 + (NEW.local_gone_at IS NOT NULL) WHERE gz_path = NEW.path;
    END;

    CREATE TABLE remote_totals (
        id         INTEGER PRIMARY KEY CHECK (id = 1),
        objects    INTEGER NOT NULL,
        bytes      INTEGER NOT NULL,
        gone       INTEGER NOT NULL,                  -- their local copy dropped
        gone_bytes INTEGER NOT NULL,
        bad        INTEGER NOT NULL                   -- their last verify failed
    );
    INSERT INTO remote_totals
        SELECT 1, count(*), coalesce(sum(bytes), 0), count(local_gone_at),
            coalesce(sum(CASE WHEN local_gone_at IS NOT NULL THEN bytes END), 0),
            count(verify_error)
        FROM remote_objects;
    CREATE TRIGGER remote_totals_in AFTER INSERT ON remote_objects BEGIN
        UPDATE remote_totals SET objects = objects + 1, bytes = bytes + NEW.bytes,
            gone = gone + (NEW.local_gone_at IS NOT NULL),
            gone_bytes = gone_bytes + CASE WHEN NEW.local_gone_at IS NULL THEN 0 ELSE NEW.bytes END,
            bad = bad + (NEW.verify_error IS NOT NULL);
    END;
    CREATE TRIGGER remote_totals_out AFTER DELETE ON remote_objects BEGIN
        UPDATE remote_totals SET objects = objects - 1, bytes = bytes - OLD.bytes,
            gone = gone - (OLD.local_gone_at IS NOT NULL),
            gone_bytes = gone_bytes - CASE WHEN OLD.local_gone_at IS NULL THEN 0 ELSE OLD.bytes END,
            bad = bad - (OLD.verify_error IS NOT NULL);
    END;
    CREATE TRIGGER remote_totals_change
        AFTER UPDATE OF bytes, local_gone_at, verify_error ON remote_objects BEGIN
        UPDATE remote_totals SET bytes = bytes - OLD.bytes + NEW.bytes,
            gone = gone - (OLD.local_gone_at IS NOT NULL) + (NEW.local_gone_at IS NOT NULL),
            gone_bytes = gone_bytes - CASE WHEN OLD.local_gone_at IS NULL THEN 0 ELSE OLD.bytes END
                + CASE WHEN NEW.local_gone_at IS NULL THEN 0 ELSE NEW.bytes END,
            bad = bad - (OLD.verify_error IS NOT NULL) + (NEW.verify_error IS NOT NULL);
    END;
    """,
    # 15: the shipped objects whose local copy is still relied on (no drop
    # recorded), as a partial index: what every ship asks for the copies it may
    # drop, few at any size (a site that ships keeps its last days here), where
    # the table holds every object ever shipped (a scan of 9,500,000 rows took
    # 2.7 s on every ship).
    """
    CREATE INDEX remote_objects_here ON remote_objects (shipped_at) WHERE local_gone_at IS NULL;
    """,
    # 16: the sha256 index carries each entry's path. The restore browser lists a
    # filter's first page in path order: for a short prefix (40,000 entries at
    # 10,000,000) the page is then chosen from the index alone and only its rows
    # are read (180 ms -> 11 ms there).
    """
    DROP INDEX entries_sha256;
    CREATE INDEX entries_sha256 ON entries (sha256, relpath);
    """,
    # 17: S3 Object Lock. Each object's retain-until as asked of the bucket (ms;
    # NULL: none) and whether its S3 legal hold is on; indexed where set, so that
    # counting what the bucket keeps and finding the holds to lift never reads
    # every object shipped.
    """
    ALTER TABLE remote_objects ADD COLUMN retain_until INTEGER;
    ALTER TABLE remote_objects ADD COLUMN legal_hold INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX remote_objects_locked ON remote_objects (retain_until)
        WHERE retain_until IS NOT NULL;
    CREATE INDEX remote_objects_held ON remote_objects (path) WHERE legal_hold;
    """,
    # 18: client-side encryption. An object sealed to age recipients names the
    # set (its fingerprint) and its key (a name of its own: age seals the same
    # bytes differently each time), and keeps the local file's size and sha256
    # beside the stored object's (bytes, sha256: what the server reads back); a
    # sealed bundle's age streams, one per member, are found by their plaintext
    # spans.
    """
    ALTER TABLE remote_objects ADD COLUMN sealed_to TEXT;
    ALTER TABLE remote_objects ADD COLUMN stored_as TEXT;
    ALTER TABLE remote_objects ADD COLUMN plain_bytes INTEGER;
    ALTER TABLE remote_objects ADD COLUMN plain_sha256 TEXT;
    CREATE INDEX remote_objects_sealed ON remote_objects (sealed_to)
        WHERE sealed_to IS NOT NULL;
    CREATE TABLE sealed_spans (
        path         TEXT NOT NULL,      -- the remote object's row
        plain_offset INTEGER NOT NULL,   -- the span of the local file this stream holds
        plain_length INTEGER NOT NULL,
        offset       INTEGER NOT NULL,   -- the stream's place in the stored object
        length       INTEGER NOT NULL,
        PRIMARY KEY (path, plain_offset)
    ) WITHOUT ROWID;
    """,
    # 19: keys the bucket may hold that no row records. A sealed object's key
    # is new each time, so one uploaded and then not recorded (a ship stopped
    # or killed before its read-back) is at a key no later ship would ever
    # look at; and an object sealed again leaves its old key to delete. Each
    # such key is written here before the step that may leave it (the upload;
    # the row's replacement, in the same transaction) and cleared with the step
    # that settles it (the row recorded, in the same transaction; the old
    # object deleted): what is left is deleted by the next ship or rekey.
    """
    CREATE TABLE remote_loose (
        key  TEXT PRIMARY KEY,   -- under the site's prefix
        path TEXT NOT NULL,      -- the archive file it was a copy of
        at   INTEGER NOT NULL    -- ms: when it was written down
    ) WITHOUT ROWID;
    """,
    # 20: the site's identity, for the day the host is gone. A random site id,
    # made once (a manifest rebuilt from the gzips takes the one coldkeep.site
    # keeps); the generation of the manifest snapshots, which only grows (each
    # snapshot carries its own, signed), and the key of the last one this host
    # shipped; the site's signing keys (Ed25519: public halves only, the
    # private one is coldkeep.sitekey). Each remote object's version as the
    # HEAD that confirmed it said it (S3's VersionId, else its ETag): reads of
    # it in place are pinned to what was checked. A loose key the bucket's lock
    # keeps is tracked until the lock ends (its retain-until and legal hold),
    # never forgotten.
    """
    CREATE TABLE site_state (
        id          INTEGER PRIMARY KEY CHECK (id = 1),
        site_id     TEXT    NOT NULL,
        generation  INTEGER NOT NULL,    -- of the newest manifest snapshot taken
        snapshot    TEXT                 -- the key of the last one shipped from here
    );
    INSERT INTO site_state (id, site_id, generation) VALUES (1, lower(hex(randomblob(16))), 0);
    CREATE TABLE site_keys (
        fingerprint TEXT    PRIMARY KEY,
        public_key  TEXT    NOT NULL,    -- the raw Ed25519 public key, base64
        added_at    INTEGER NOT NULL,    -- ms
        retired_at  INTEGER              -- ms: replaced (lost, or rotated)
    ) WITHOUT ROWID;
    ALTER TABLE remote_objects ADD COLUMN version TEXT;
    ALTER TABLE remote_loose ADD COLUMN retain_until INTEGER;
    ALTER TABLE remote_loose ADD COLUMN legal_hold INTEGER NOT NULL DEFAULT 0;
    """,
    # 21: a job run's owner (the process running it: host, boot, pid, start time),
    # so that the next scheduler to start settles a run whose process was killed
    # as 'killed' instead of leaving it 'running' for ever. SQLite cannot change a
    # CHECK in place, so the table is copied.
    """
    CREATE TABLE job_runs_21 (
        id          INTEGER PRIMARY KEY,
        job         TEXT    NOT NULL,
        trigger     TEXT    NOT NULL,                 -- schedule | boot | manual
        started_at  INTEGER NOT NULL,                 -- ms since the epoch (queued)
        ended_at    INTEGER,
        status      TEXT    NOT NULL DEFAULT 'running'
                    CHECK (status IN ('waiting', 'running', 'ok', 'error', 'timeout',
                                      'cancelled', 'killed')),
        error       TEXT,
        summary     TEXT,                             -- JSON
        owner       TEXT                              -- core/base/process.py; NULL before 21
    );
    INSERT INTO job_runs_21 (id, job, trigger, started_at, ended_at, status, error, summary)
        SELECT id, job, trigger, started_at, ended_at, status, error, summary FROM job_runs;
    DROP TABLE job_runs;
    ALTER TABLE job_runs_21 RENAME TO job_runs;
    CREATE INDEX job_runs_job ON job_runs (job, started_at);
    """,
    # 22: the generation of the newest manifest snapshot that names an event
    # month's copy as the month's newest: a ship removes the copies that neither
    # of the site's two newest snapshots names (the bucket holds about two of a
    # month, not one for each time it changed). A manifest of before 22 names
    # its months' newest copies in the snapshot it last took.
    """
    ALTER TABLE remote_objects ADD COLUMN newest_in INTEGER;
    UPDATE remote_objects SET newest_in = (SELECT generation FROM site_state WHERE id = 1)
        WHERE month IS NOT NULL AND path = (
            SELECT o.path FROM remote_objects AS o WHERE o.month = remote_objects.month
            ORDER BY o.shipped_at DESC, o.path DESC LIMIT 1);
    """,
    # 23: thaws asked of cold objects (GLACIER, DEEP_ARCHIVE), by the object's
    # key under the site: written before the request is sent, so a kill loses
    # none (the next thaw or poll asks S3 what came of it); and the restores
    # (`restore --thaw`) waiting for their objects, which the scheduler finishes.
    """
    CREATE TABLE thaw_restores (
        id INTEGER PRIMARY KEY,
        selection TEXT NOT NULL,
        target TEXT,
        tier TEXT NOT NULL,
        days INTEGER NOT NULL,
        asked_at INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('waiting', 'done', 'failed')),
        ended_at INTEGER,
        detail TEXT
    );
    CREATE TABLE thaws (
        key TEXT PRIMARY KEY,
        path TEXT NOT NULL,
        tier TEXT NOT NULL CHECK (tier IN ('bulk', 'standard', 'expedited')),
        days INTEGER NOT NULL CHECK (days >= 1),
        asked_at INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('asking', 'asked', 'failed')),
        error TEXT
    );
    """,
    # 24: the identity file (its path, never its keys) a `restore --thaw` of
    # sealed copies was given: the scheduler opens them with it when it
    # finishes the restore; and the S3 storage class each object was put in
    # (NULL before: the config's class for its kind is taken), so what status
    # says each class holds stays true after storage_class changes.
    """
    ALTER TABLE thaw_restores ADD COLUMN identity TEXT;
    ALTER TABLE remote_objects ADD COLUMN storage_class TEXT;
    """,
    # 25: an event month shipped as a gzip with seek points (its object's key
    # ends .db.gz; plain_bytes and plain_sha256 are the database's): the points
    # (codec.encode_points, the first one the deflate data's start), so the
    # month is read in place a few pages at a time. NULL: the object is the
    # database itself (sealed, or shipped before 25).
    """
    ALTER TABLE remote_objects ADD COLUMN seek_points TEXT;
    """,
    # 26: the fleet's lake: each Parquet object a ship put for an event month,
    # by its key under the remote's prefix (lake/events/site=.../month=.../),
    # recorded once the bucket gave back its size and sha256, with the month's
    # database it was made from; superseded_at once a newer one of the month is
    # recorded (or the month expired): deleted when the bucket's lock lets it go.
    """
    CREATE TABLE lake_objects (
        key           TEXT PRIMARY KEY,
        month         TEXT NOT NULL,
        source_sha256 TEXT NOT NULL,
        rows          INTEGER NOT NULL,
        bytes         INTEGER NOT NULL,
        sha256        TEXT NOT NULL,
        shipped_at    INTEGER NOT NULL,
        retain_until  INTEGER,
        legal_hold    INTEGER NOT NULL DEFAULT 0,
        version       TEXT,
        superseded_at INTEGER
    );
    CREATE INDEX lake_objects_month ON lake_objects (month);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


def version_problem(path: Path, version: int, readonly: bool) -> str | None:
    """Why the database at ``path``, at schema ``version``, cannot be opened as
    asked (``readonly``), or None."""
    if version > SCHEMA_VERSION:
        return (
            f"{path} has schema version {version}, this coldkeep knows up to "
            f"{SCHEMA_VERSION}: upgrade coldkeep (the database is left untouched)"
        )
    if version < SCHEMA_VERSION and readonly:
        return (
            f"{path} has schema version {version} and needs migrating: "
            "run any mutating coldkeep command once"
        )
    return None


def migration_scripts(version: int) -> Iterator[tuple[int, str]]:
    """Each migration a database at ``version`` still needs, with the version it
    brings it to: its statements and the version bump, one transaction."""
    for n in range(version, SCHEMA_VERSION):
        yield n + 1, f"BEGIN IMMEDIATE;\n{MIGRATIONS[n]}\nPRAGMA user_version = {n + 1};\nCOMMIT;"
