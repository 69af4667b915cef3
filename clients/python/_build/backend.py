"""The PEP 517 build backend of media-jobs for Python, standard library only.

Why not setuptools: the package must install offline with nothing but Python, and setuptools
cannot promise that (a fresh Python 3.12+ venv has none; setuptools before 70.1 needs the separate
`wheel` package to build a wheel). A pure-Python package's wheel is a zip of its files and four
metadata files, written here.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "media_jobs"
DIST_NAME = "media-jobs"
SUMMARY = "Python client, webhook verifier and remote worker of the media-jobs service (standard library only)"
WHEEL = "Wheel-Version: 1.0\nGenerator: media-jobs-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
ENTRY_POINTS = "[console_scripts]\nmedia-jobs-worker = media_jobs.worker:main\n"


def _version():
    with open(os.path.join(ROOT, PACKAGE, "_version.py"), encoding="utf-8") as f:
        return re.search(r'__version__ = "([^"]+)"', f.read()).group(1)


def _metadata():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return "".join([
        "Metadata-Version: 2.1\n",
        "Name: %s\n" % DIST_NAME,
        "Version: %s\n" % _version(),
        "Summary: %s\n" % SUMMARY,
        "License: MIT\n",
        "Requires-Python: >=3.9\n",
        "Classifier: Programming Language :: Python :: 3 :: Only\n",
        "Classifier: License :: OSI Approved :: MIT License\n",
        "Classifier: Typing :: Typed\n",
        "Description-Content-Type: text/markdown\n",
        "\n",
        readme,
    ])


def _package_files():
    """(name in the archive, path) of every module and the py.typed marker."""
    pkg = os.path.join(ROOT, PACKAGE)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed":
            yield "%s/%s" % (PACKAGE, name), os.path.join(pkg, name)


def _dist_info():
    return "%s-%s.dist-info" % (PACKAGE, _version())


def _write_wheel(directory, editable=False):
    filename = "%s-%s-py3-none-any.whl" % (PACKAGE, _version())
    info = _dist_info()
    records = []
    with zipfile.ZipFile(os.path.join(directory, filename), "w", zipfile.ZIP_DEFLATED) as zf:

        def add(name, data):
            zf.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append("%s,sha256=%s,%d" % (name, digest, len(data)))

        if editable:  # pip install -e: a .pth file puts this directory on sys.path
            add("%s.pth" % PACKAGE, (ROOT + "\n").encode("utf-8"))
        else:
            for name, path in _package_files():
                with open(path, "rb") as f:
                    add(name, f.read())
        add(info + "/METADATA", _metadata().encode("utf-8"))
        add(info + "/WHEEL", WHEEL.encode("utf-8"))
        add(info + "/entry_points.txt", ENTRY_POINTS.encode("utf-8"))
        add(info + "/top_level.txt", (PACKAGE + "\n").encode("utf-8"))
        records.append(info + "/RECORD,,")
        zf.writestr(info + "/RECORD", "\n".join(records) + "\n")
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (PACKAGE, _version())
    filename = base + ".tar.gz"
    names = ["pyproject.toml", "README.md", "_build/backend.py"] + [n for n, _ in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for name in names:
            tf.add(os.path.join(ROOT, name), arcname="%s/%s" % (base, name))
        info = _metadata().encode("utf-8")
        entry = tarfile.TarInfo("%s/PKG-INFO" % base)
        entry.size, entry.mtime = len(info), int(time.time())
        tf.addfile(entry, io.BytesIO(info))
    return filename
