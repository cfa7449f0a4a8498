"""faultfs: a fault-injecting FUSE passthrough filesystem for coldkeep's tests.

A real directory (``backing``) is served at a mountpoint by a server in its own
process (libfuse3 through mfusepy, multithreaded), so a test does real I/O —
SQLite in WAL mode, renames, links, ``O_EXCL``, fsync of files and directories —
and the filesystem under it can be told, at run time, to misbehave:

* fail an operation with any errno (EIO, ENOSPC, EDQUOT, ...), per op and per
  path glob, after N calls or (writes) after N bytes, N times or forever;
* slow an operation down;
* fill up: report a small free space and refuse growth beyond a byte budget;
* count every call per (op, path);
* volatile mode: keep what a power cut would lose, and ``cut()`` the power:
  the backing directory is rolled back to exactly what a strict POSIX filesystem
  guarantees (the model is in ``faultfs.volatile``'s docstring).

Using it
--------
Machines without FUSE skip: ``fixture.start_or_skip`` turns ``MountUnavailable``
into ``pytest.skip(reason)``; a server that fails for any other reason fails the
test with its log. Needs: Debian ``fuse3`` and ``libfuse3-3``, PyPI ``mfusepy``;
libfuse 2 beside them is fine (the server loads libfuse 3 by name:
``coldkeep.core.ops.libfuse``).

In a test module (the fixtures mount ``tmp_path/backing`` at ``tmp_path/mnt``)::

    from faultfs import FaultFS

    pytest_plugins = ["faultfs.fixture"]      # the fixtures faultfs, volatile_faultfs

    def test_disk_full(faultfs: FaultFS) -> None:
        rule = faultfs.fail("write", "**/*.partial", errno.ENOSPC, after_bytes=1 << 20)
        ...                                   # run coldkeep against faultfs.mount
        assert faultfs.hits(rule) == 1
        assert faultfs.calls("fsyncdir", "archive/files") >= 1

    def test_power_cut(volatile_faultfs: FaultFS) -> None:
        fs = volatile_faultfs
        ...                                   # run (or SIGKILL) a process on fs.mount
        fs.cut()                              # the backing dir is now what survived
        fs.remount()                          # or read fs.backing directly
        ...                                   # run recovery on fs.mount

Or with your own directories: ``with FaultFS(backing, mount, volatile=True) as fs:``
(``faultfs.mounted(...)`` is the same). The API, all on ``FaultFS``:

``fail(op, path="**", errno=EIO, *, after_calls=0, after_bytes=None, times=None)``,
``slow(op, seconds, path="**", *, times=None)``, ``full(free_bytes)`` /
``full(None)``, ``remove(rule_id)``, ``clear()``, ``hits(rule_id)``, ``rules()``,
``calls(op, path="**")``, ``call_log()``, ``reset_calls()``; volatile only:
``pending()``, ``sync()``, ``cut()``; and ``remount(volatile=None)``, ``stop()``,
``log()`` (the server's output), ``path(*parts)`` (under the mount).

Op names: getattr readlink mknod mkdir unlink rmdir symlink rename link chmod
chown truncate open create read write statfs flush release fsync opendir readdir
releasedir fsyncdir utimens fallocate, or ``"*"``. ``create`` is an open with
``O_CREAT`` (the kernel sends it when the name did not exist); ``open`` names both
(every open), in rules and in counts. ``os.fsync`` on a directory descriptor
arrives as ``fsyncdir``, never as ``fsync``. Paths are relative to the mount, the
root is ``"."``; ``**/`` is any number of directories, ``*`` stays in one.

Things to know:

* A write fault fails the ``write(2)`` that reaches it: the mount has no
  writeback cache, every write goes to the server before it returns.
* Reads can be served from the kernel's page cache while a file stays open; a
  read fault reliably hits reads of a file opened after the rule was set.
* ``st_ino`` is the backing inode (``use_ino``), stable across remounts;
  ``st_dev`` is the mount's and changes with every mount.
* POSIX (``fcntl``) and ``flock`` locks are kept by the kernel, per mount;
  Unix sockets can be bound on the mount.
* Each hard link of a file is its own kernel inode (libfuse's high-level API);
  attributes are never cached (``attr_timeout=0``), so ``st_nlink``, size and
  mtime are always the backing's.
* After ``cut()`` every call on the old mount fails (EIO, then ENOTCONN):
  kill the processes using it first if they should not see that.

Modules: ``mount`` (the client, lifecycle: a server is forked from a warm one,
tests/clizygote.py, where the environment allows), ``fixture`` (pytest),
``server`` (the process), ``binding`` (mfusepy glue), ``passthrough`` (the
operations), ``rules`` (faults and counts), ``volatile`` (the power-cut model),
``control`` (the socket protocol), ``renameat2``.
"""

from __future__ import annotations

from .mount import FaultFS, MountError, MountUnavailable, mounted, unavailable_reason

__all__ = ["FaultFS", "MountError", "MountUnavailable", "mounted", "unavailable_reason"]
