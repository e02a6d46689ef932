"""Symbol path parsing: the Windows debuggers' syntax, in search order."""

from __future__ import annotations

import os

import pytest

from dsymfind.stores.symbol_path import Cache, Chain, Folder, SymbolPathError, parse

DEFAULT = "/cache/symbols"


def test_elements_keep_their_order_and_kinds() -> None:
    text = "cache*/c; /plain ;srv*/down*https://msdl.microsoft.com/download/symbols;;"
    assert parse(text, default_store=DEFAULT) == [
        Cache("/c"),
        Folder("/plain"),
        Chain(("/down", "https://msdl.microsoft.com/download/symbols")),
    ]


@pytest.mark.parametrize(
    ("text", "stores"),
    [
        ("srv*https://s.example/sym", (DEFAULT, "https://s.example/sym")),
        ("SRV**https://s.example/sym", (DEFAULT, "https://s.example/sym")),
        ("Srv*/a*/b*http://s.example/", ("/a", "/b", "http://s.example/")),
        ("symsrv*symsrv.dll*/a*https://s.example/", ("/a", "https://s.example/")),
        ("srv*/a*/mnt/share/store", ("/a", "/mnt/share/store")),
        ("srv*/only/local", ("/only/local",)),
    ],
)
def test_server_chains(text: str, stores: tuple[str, ...]) -> None:
    (chain,) = parse(text, default_store=DEFAULT)
    assert isinstance(chain, Chain)
    assert chain.stores == stores
    assert chain.url == (stores[-1] if "://" in stores[-1] else None)


def test_cache_without_a_folder_uses_the_default_store() -> None:
    assert parse("cache*", default_store=DEFAULT) == [Cache(DEFAULT)]


def test_local_paths_are_absolute_and_expand_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    (chain, folder) = parse("srv*~/sym*https://s.example/;relative/dir", default_store=DEFAULT)
    assert chain == Chain(("/home/someone/sym", "https://s.example/"))
    assert folder == Folder(os.path.join(os.getcwd(), "relative", "dir"))


def test_empty_path_has_no_elements() -> None:
    assert parse("", default_store=DEFAULT) == []
    assert parse(" ; ;", default_store=DEFAULT) == []


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("symopt*1", "unknown keyword 'symopt'"),
        ("https://s.example/sym", "srv*URL"),
        ("srv*https://a.example/*/down", "must end its srv* chain"),
        ("cache*https://a.example/", "one local folder"),
        ("cache*/a*/b", "one local folder"),
    ],
)
def test_bad_elements_are_named(text: str, complaint: str) -> None:
    with pytest.raises(SymbolPathError) as raised:
        parse(f"/fine;{text}", default_store=DEFAULT)
    assert complaint in str(raised.value)
    assert repr(text) in str(raised.value)
