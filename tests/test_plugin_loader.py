"""Registration: the entry point, an import-light loader, and TensorBoard surviving a broken plugin."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import subprocess
import sys

from tests.conftest import make_tb_app


def test_entry_point_names_the_loader():
    eps = [e for e in importlib.metadata.entry_points(group="tensorboard_plugins") if e.name == "tb_attn"]
    assert eps, "tb-attn is not installed (pip install -e .): TensorBoard would not find the plugin"
    assert {e.value for e in eps} == {"tb_attn_plugin.plugin.loader:AttentionPluginLoader"}


def test_loader_module_imports_nothing_heavy():
    code = ("import sys, tb_attn_plugin.plugin.loader; "
            "print(' '.join(m for m in sys.modules if m.split('.')[0] in "
            "('werkzeug', 'msgspec', 'torch', 'fsspec', 'multiprocessing', 'numpy', 'pandas') "
            "or m.startswith(('tb_attn_plugin.report', 'tb_attn_plugin.trace', 'tb_attn_plugin.plugin.plugin'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_broken_install_logs_an_error_and_tensorboard_still_serves(tmp_path, monkeypatch, caplog):
    # None in sys.modules makes "from .plugin import AttentionPlugin" raise ImportError, as a
    # missing dependency or a half-removed install would.
    monkeypatch.setitem(sys.modules, "tb_attn_plugin.plugin.plugin", None)
    (tmp_path / "logdir").mkdir()
    with caplog.at_level(logging.ERROR, logger="tb_attn_plugin.plugin.loader"):
        client, plugins = make_tb_app(tmp_path / "logdir", tmp_path / "cache")
    assert "tb_attn" not in plugins
    assert any("Attention plugin cannot be imported" in r.getMessage() for r in caplog.records)
    r = client.get("/data/plugins_listing")
    assert r.status_code == 200 and "tb_attn" not in json.loads(r.data)
    assert client.get("/data/plugin/tb_attn/runs").status_code == 404


def test_without_logdir_routes_answer_clearly():
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client

    from tb_attn_plugin.plugin.plugin import AttentionPlugin

    plugin = AttentionPlugin(base_plugin.TBContext(logdir=None))
    try:
        assert plugin.is_active() is False
        assert sorted(plugin.get_plugin_apps()) == ["/*", "/annotated", "/call", "/compare", "/index.js", "/kernels",
                                                    "/memory", "/ranks", "/report", "/runs", "/static/*", "/sweep", "/sweeps"]
        apps = plugin.get_plugin_apps()
        r = Client(apps["/report"]).get("/data/plugin/tb_attn/report?run=x")
        assert r.status_code == 404 and "without --logdir" in json.loads(r.data)["error"]
        r = Client(apps["/annotated"]).get("/data/plugin/tb_attn/annotated?run=x")
        assert r.status_code == 404 and "without --logdir" in json.loads(r.data)["error"]
        r = Client(apps["/ranks"]).get("/data/plugin/tb_attn/ranks?run=x")
        assert r.status_code == 404 and "without --logdir" in json.loads(r.data)["error"]
        r = Client(apps["/runs"]).get("/data/plugin/tb_attn/runs")
        assert r.status_code == 200 and json.loads(r.data)["runs"] == []
    finally:
        plugin.close()


def test_a_bad_settle_time_is_a_warning_not_a_dead_tensorboard(tmp_path, caplog):
    (tmp_path / "logdir").mkdir()
    for bad in ("two", "nan", "-1", "1e9"):
        with caplog.at_level(logging.WARNING, logger="tb_attn_plugin.plugin.plugin"):
            client, plugins = make_tb_app(tmp_path / "logdir", tmp_path / "cache", env={"TB_ATTN_SETTLE_S": bad})
        try:
            assert plugins["tb_attn"]._index.settle_s == 2.0
            assert any(f"TB_ATTN_SETTLE_S={bad!r}" in r.getMessage() for r in caplog.records)
            assert client.get("/data/plugin/tb_attn/runs").status_code == 200
        finally:
            plugins["tb_attn"].close()
