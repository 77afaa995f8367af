"""The ``tensorboard_plugins`` entry point.

TensorBoard imports this module for every user who has tb-attn installed, before it serves
anything, and an exception here would stop TensorBoard from starting. So the module imports only
TensorBoard's own base class; the plugin (werkzeug, the engine, multiprocessing) is imported in
``load()``, where any failure is logged and the plugin is left out instead.
"""

from __future__ import annotations

import logging

from tensorboard.plugins import base_plugin

logger = logging.getLogger(__name__)


class AttentionPluginLoader(base_plugin.TBLoader):
    """Builds the Attention plugin; returns None (plugin absent, TensorBoard fine) if it cannot."""

    def load(self, context):
        try:
            from .plugin import AttentionPlugin
        except Exception as exc:  # a broken or partial install: say so, keep TensorBoard up
            logger.error("tb-attn: the Attention plugin cannot be imported and is disabled (%s: %s); "
                         "reinstall with: pip install 'tb-attn[plugin]'", type(exc).__name__, exc, exc_info=True)
            return None
        try:
            return AttentionPlugin(context)
        except Exception as exc:
            logger.error("tb-attn: the Attention plugin failed to start and is disabled (%s: %s)",
                         type(exc).__name__, exc, exc_info=True)
            return None
