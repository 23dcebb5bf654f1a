"""The machine's build cache (scripts/build_cache.sh): what a fresh clone copies instead of
building is exactly what was put, and an entry that fails its checksums is never used."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cache(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source scripts/build_cache.sh; {script}"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "AGENT_PY_BUILD_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
    )


def built(tmp_path: Path) -> Path:
    src = tmp_path / "build"
    (src / "lib").mkdir(parents=True)
    (src / "lib" / "libx.a").write_bytes(b"archive")
    (src / "tool").write_text("#!/bin/sh\n")
    (src / "tool").chmod(0o755)
    return src


def test_an_entry_comes_back_whole_and_executable(tmp_path: Path) -> None:
    src = built(tmp_path)
    put = cache(tmp_path, f"build_cache_put engine-abc {src} lib/libx.a tool")
    assert put.returncode == 0, put.stderr
    got = cache(tmp_path, f"build_cache_get engine-abc {tmp_path / 'clone'}")
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "clone" / "lib" / "libx.a").read_bytes() == b"archive"
    assert (tmp_path / "clone" / "tool").stat().st_mode & 0o111


def test_a_missing_entry_is_a_miss(tmp_path: Path) -> None:
    assert cache(tmp_path, f"build_cache_get engine-other {tmp_path / 'clone'}").returncode == 1
    assert not (tmp_path / "clone").exists()


def test_an_entry_that_fails_its_checksums_is_removed_not_used(tmp_path: Path) -> None:
    src = built(tmp_path)
    assert cache(tmp_path, f"build_cache_put engine-abc {src} lib/libx.a tool").returncode == 0
    (tmp_path / "cache" / "engine-abc" / "lib" / "libx.a").write_bytes(b"tampered")
    got = cache(tmp_path, f"build_cache_get engine-abc {tmp_path / 'clone'}")
    assert got.returncode == 1
    assert "fails its checksums" in got.stderr
    assert not (tmp_path / "clone" / "lib" / "libx.a").exists()
    assert not (tmp_path / "cache" / "engine-abc").exists()


def test_a_leftover_without_checksums_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "cache" / "engine-abc").mkdir(parents=True)
    (tmp_path / "cache" / "engine-abc" / "tool").write_text("stale")
    src = built(tmp_path)
    assert cache(tmp_path, f"build_cache_put engine-abc {src} lib/libx.a tool").returncode == 0
    assert cache(tmp_path, f"build_cache_get engine-abc {tmp_path / 'clone'}").returncode == 0
    assert (tmp_path / "clone" / "tool").read_text() == "#!/bin/sh\n"


def test_keys_follow_every_input(tmp_path: Path) -> None:
    keys = cache(
        tmp_path,
        'build_cache_key a b; build_cache_key a c; build_cache_key "a b"; build_cache_key a b',
    ).stdout.split()
    assert len(keys) == 4 and all(len(k) == 16 for k in keys)
    assert keys[0] == keys[3]
    assert len(set(keys[:3])) == 3
