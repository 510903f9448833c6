"""A stand-in for ``packaging.version`` where packaging is not installed.

MCore compares the Transformer Engine and torch versions with
``packaging.version.Version`` (megatron/core/utils.py, is_te_min_version),
so a placeholder would not do: comparisons must be by release number. This
orders versions as PEP 440 does for the forms those checks use: a release
(2.18.0), optional pre-release (a, b, rc), .postN, .devN; a +local part is
ignored.
"""

import re
import sys
import types

_VERSION = re.compile(
    r"^v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|b|c|rc|alpha|beta)[-_.]?(?P<pre_n>\d*))?"
    r"(?:[-_.]?post[-_.]?(?P<post>\d*))?"
    r"(?:[-_.]?dev[-_.]?(?P<dev>\d*))?"
    r"(?:\+[a-z0-9.]+)?$",
    re.I,
)
_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2}


class InvalidVersion(ValueError):
    pass


class Version:
    def __init__(self, text):
        m = _VERSION.match(str(text).strip())
        if not m:
            raise InvalidVersion(f"Invalid version: {text!r}")
        release = [int(x) for x in m.group("release").split(".")]
        while len(release) > 1 and release[-1] == 0:
            release.pop()
        self.release = tuple(int(x) for x in m.group("release").split("."))
        self.major, self.minor, self.micro = (list(self.release) + [0, 0])[:3]
        pre = (_PRE[m.group("pre").lower()], int(m.group("pre_n") or 0)) if m.group("pre") else None
        post = int(m.group("post") or 0) if m.group("post") is not None else -1
        dev = int(m.group("dev") or 0) if m.group("dev") is not None else None
        # dev releases sort before pre-releases, which sort before the release.
        pre_key = (-1, 0) if dev is not None and pre is None and post < 0 else (pre if pre else (3, 0))
        self._key = (tuple(release), pre_key, post, dev if dev is not None else float("inf"))
        self.base_version = ".".join(str(x) for x in self.release)
        self._text = str(text)

    def __str__(self):
        return self._text

    def __repr__(self):
        return f"<Version({self._text!r})>"

    def _other(self, other):
        return other if isinstance(other, Version) else Version(other)

    def __eq__(self, other):
        return self._key == self._other(other)._key

    def __lt__(self, other):
        return self._key < self._other(other)._key

    def __le__(self, other):
        return self._key <= self._other(other)._key

    def __gt__(self, other):
        return self._key > self._other(other)._key

    def __ge__(self, other):
        return self._key >= self._other(other)._key

    def __hash__(self):
        return hash(self._key)


def parse(text):
    return Version(text)


def install_if_missing():
    """Register this module as packaging.version unless packaging imports."""
    try:
        import packaging.version  # noqa: F401

        return False
    except ImportError:
        pass
    pkg = types.ModuleType("packaging")
    pkg.__path__ = []
    ver = types.ModuleType("packaging.version")
    ver.Version, ver.InvalidVersion, ver.parse = Version, InvalidVersion, parse
    pkg.version = ver
    sys.modules["packaging"], sys.modules["packaging.version"] = pkg, ver
    return True
