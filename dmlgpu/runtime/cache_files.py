"""The disk caches' directory and its files, as a trust boundary (as pip's, ccache's and Mesa's).

What the disk caches hold is code: SPIR-V that becomes the user's shaders, and the driver's
pipeline-cache data. Whatever another local user can write there must never decide what runs,
hang a process, exhaust its memory or make dmlgpu touch files that are not its own. So:

- The directory (`cache_dir`): `DMLGPU_CACHE_DIR` ("" turns the disk caches off; a relative
  path is taken from the working directory), else `$XDG_CACHE_HOME/dmlgpu` when that variable
  is an absolute path (the XDG Base Directory spec says to ignore a relative one), else
  `~/.cache/dmlgpu`. Missing folders on the way are made `0700`, whatever the umask. It is used
  only when it is a directory owned by the effective user and writable by no one else;
  otherwise the disk caches are off, with one `CacheWarning` per process and directory that
  names it, says what is wrong and how to fix it.
- Every access goes through a descriptor of the directory, opened and checked (fstat) for the
  operation, so a directory swapped after the check is never followed. Files are opened
  relative to it with `O_NOFOLLOW | O_NONBLOCK`, must be regular files owned by the user and
  writable by no one else, and are read up to a bound, the largest entry its writer writes;
  a larger file is refused unread (a FIFO, a link to /dev/zero, a 4 GiB sparse file cost
  nothing). Subfolders (`spirv/`) are opened the same way, never through a link.
- Files are written under a temporary name (`0600`, `O_EXCL`) and renamed into place. The prune
  lists the directory through its descriptor and removes only regular files of the names asked
  for (and temporary files an hour old): it never follows a link and never leaves the folder.
- Entries carry a keyed MAC (`Folder.mac`: HMAC-SHA256 with a random 32-byte secret kept in the
  directory as `secret.key`, made `0600` under a temporary name and linked into place, so
  processes that race agree on one; it is read like any cache file). A file forged without the
  secret is refused and rebuilt, even though its name and checksums derive from public data.
"""
from __future__ import annotations

import errno
import hashlib
import hmac
import os
import stat
import threading
import time
import warnings
from pathlib import Path

from ..errors import CacheWarning

__all__ = ["MAC_BYTES", "SECRET_NAME", "Folder", "Untrusted", "cache_dir", "open_folder"]

#: The MAC's length (HMAC-SHA256) and the secret's file, in the cache directory.
MAC_BYTES = 32
SECRET_NAME = "secret.key"
_SECRET_BYTES = 32
#: Temporary files older than this (a writer that died midway) go at the next prune.
TEMP_SECONDS = 3600
_TEMP_SUFFIX = ".tmp"
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_lock = threading.Lock()
_warned: set = set()  # (directory, why) already warned about in this process
_secrets: dict = {}  # (st_dev, st_ino) of a cache directory -> its secret


class Untrusted(Exception):
    """A cache directory or file dmlgpu does not use: `str()` says why."""


def cache_dir() -> Path | None:
    """The cache directory (not made here), or None when `DMLGPU_CACHE_DIR` is empty."""
    chosen = os.environ.get("DMLGPU_CACHE_DIR")
    if chosen is not None:
        return Path(os.path.abspath(os.path.expanduser(chosen))) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, empty or relative: ignored, as the XDG spec says
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dmlgpu"


def open_folder(subfolder: str | None = None, path: Path | None = None) -> "Folder | None":
    """The cache directory (`path`, default `cache_dir()`), or its `subfolder`, made if missing
    and checked: a `Folder` to use in a `with` block; None when the disk caches are off (by
    `DMLGPU_CACHE_DIR=""`, or because the directory is not private: warned once). Raises
    OSError where the directory cannot be made or opened (not writable, a file in the way)."""
    path = cache_dir() if path is None else Path(path)
    if path is None:
        return None
    _make_private(path)
    fd = os.open(path, _DIR_FLAGS)
    try:
        info = _check_folder(fd, path)
        secret = _secret(fd, info)
        if subfolder is not None:
            top, fd = fd, _open_subfolder(fd, path, subfolder)
            os.close(top)
            path = path / subfolder
    except Untrusted as why:
        os.close(fd)
        _warn(path, str(why))
        return None
    except BaseException:
        os.close(fd)
        raise
    return Folder(fd, path, secret)


def _make_private(path: Path) -> None:
    """Make `path` and its missing parents, each `0700` (`os.makedirs` gives parents the
    umask's mode, `0777` under `umask 000`)."""
    missing = []
    folder = path
    while not os.path.lexists(folder):
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:  # another process made it meanwhile: checked below like any
            pass


def _check_folder(fd: int, path: Path) -> os.stat_result:
    info = os.fstat(fd)
    if info.st_uid != os.geteuid():
        raise Untrusted(f"it is owned by uid {info.st_uid}, not by this user (uid {os.geteuid()}); "
                        "point DMLGPU_CACHE_DIR at a directory of your own")
    if info.st_mode & 0o022:
        raise Untrusted(f"others can write into it (mode {stat.S_IMODE(info.st_mode):04o}); "
                        f"make it private (chmod 700 '{path}') or point DMLGPU_CACHE_DIR elsewhere")
    return info


def _open_subfolder(fd: int, path: Path, name: str) -> int:
    try:
        os.mkdir(name, 0o700, dir_fd=fd)
    except FileExistsError:
        pass
    try:
        sub = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
    except OSError as exc:  # ELOOP (a link) or ENOTDIR (a file)
        raise Untrusted(f"'{name}' in it is not a directory of its own ({exc.strerror}); "
                        f"remove '{path / name}'") from None
    try:
        _check_folder(sub, path / name)
    except BaseException:
        os.close(sub)
        raise
    return sub


def _warn(path: Path, why: str) -> None:
    with _lock:
        if (str(path), why) in _warned:
            return
        _warned.add((str(path), why))
    warnings.warn(f"dmlgpu does not use the cache directory '{path}': {why}. The disk caches are off "
                  "(DMLGPU_CACHE_DIR='' turns them off without this warning).", CacheWarning, stacklevel=3)


class Folder:
    """A cache directory (or subfolder) opened and checked: read, write, prune and MAC its
    files through its descriptor. A context manager; `close()` ends it."""

    def __init__(self, fd: int, path: Path, secret: bytes):
        self._fd = fd
        self.path = path
        self._secret = secret

    def __enter__(self) -> "Folder":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def mac(self, *parts) -> bytes:
        """HMAC-SHA256 of `parts` (bytes-like, in order) under the directory's secret."""
        digest = hmac.new(self._secret, digestmod=hashlib.sha256)
        for part in parts:
            digest.update(part)
        return digest.digest()

    def read(self, name: str, limit: int) -> bytes:
        """The file `name`, at most `limit` bytes. Raises FileNotFoundError when there is
        none, Untrusted for anything not read (not a regular file of this user's, larger than
        `limit`), OSError when it cannot be read."""
        return _read(self._fd, name, limit)

    def write(self, name: str, *parts) -> None:
        """Write `parts` as the file `name`: a temporary file (`0600`) renamed over it, so a
        reader finds the old file or the whole new one. Raises OSError."""
        temp = f".{name}-{os.urandom(6).hex()}{_TEMP_SUFFIX}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=self._fd)
        try:
            with open(fd, "wb", closefd=True) as f:
                for part in parts:
                    f.write(part)
            os.replace(temp, name, src_dir_fd=self._fd, dst_dir_fd=self._fd)
            temp = None
        finally:
            if temp is not None:
                try:
                    os.unlink(temp, dir_fd=self._fd)
                except OSError:
                    pass

    def prune(self, matches, keep: int, spare: str | None = None) -> None:
        """Keep the `keep` newest regular files whose names `matches(name)` accepts (and
        `spare`, always); remove the others, and temporary files older than TEMP_SECONDS.
        Links and anything not a regular file are never followed nor removed."""
        now = time.time()
        found = []
        with os.scandir(self._fd) as entries:
            for entry in entries:
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.name.startswith(".") and entry.name.endswith(_TEMP_SUFFIX):
                    if now - info.st_mtime > TEMP_SECONDS:
                        self._remove(entry.name)
                elif matches(entry.name) and entry.name != spare:
                    found.append((info.st_mtime, entry.name))
        found.sort(reverse=True)
        for _, name in found[max(0, keep - (spare is not None)):]:
            self._remove(name)

    def _remove(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self._fd)
        except OSError:
            pass


def _read(dir_fd: int, name: str, limit: int, private: bool = False) -> bytes:
    """`Folder.read`; `private`: the file must also be unreadable by others (the secret)."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Untrusted("a symbolic link") from None
        raise
    with open(fd, "rb", closefd=True) as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Untrusted("not a regular file")
        if info.st_uid != os.geteuid():
            raise Untrusted(f"owned by uid {info.st_uid}")
        if info.st_mode & (0o077 if private else 0o022):
            raise Untrusted(f"open to others (mode {stat.S_IMODE(info.st_mode):04o})")
        if info.st_size > limit:
            raise Untrusted(f"{info.st_size} bytes, more than the {limit} its writer writes")
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew meanwhile
        raise Untrusted(f"more than the {limit} bytes its writer writes")
    return data


def _secret(fd: int, info: os.stat_result) -> bytes:
    """The directory's secret (`SECRET_NAME`): read once per process, made if missing or not
    a private file of this user's (entries MACed with a replaced one are rebuilt)."""
    key = (info.st_dev, info.st_ino)
    with _lock:
        secret = _secrets.get(key)
    if secret is not None:
        return secret
    secret = _read_secret(fd)
    if secret is None:
        secret = _make_secret(fd)
    with _lock:
        _secrets[key] = secret
    return secret


def _read_secret(fd: int) -> bytes | None:
    try:
        secret = _read(fd, SECRET_NAME, _SECRET_BYTES, private=True)
    except (Untrusted, FileNotFoundError):
        return None
    return secret if len(secret) == _SECRET_BYTES else None


def _make_secret(fd: int) -> bytes:
    """A new secret, linked into place unless another process made one first (then that one);
    one that is not a private file of this user's is replaced."""
    temp = f".{SECRET_NAME}-{os.urandom(6).hex()}{_TEMP_SUFFIX}"
    new = os.urandom(_SECRET_BYTES)
    out = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
    try:
        with open(out, "wb", closefd=True) as f:
            f.write(new)
        try:
            os.link(temp, SECRET_NAME, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        except FileExistsError:  # made meanwhile (then that one), or a bad one: replaced
            secret = _read_secret(fd)
            if secret is not None:
                return secret
            os.replace(temp, SECRET_NAME, src_dir_fd=fd, dst_dir_fd=fd)
            temp = None
    finally:
        if temp is not None:
            try:
                os.unlink(temp, dir_fd=fd)
            except OSError:
                pass
    return new
