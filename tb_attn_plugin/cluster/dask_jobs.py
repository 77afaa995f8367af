"""Per-trace analyses on a Dask cluster: each worker reads its trace itself (a path it can see, or
an fsspec URL) and sends back only the compact report, as JSON bytes; the client merges them.

Dask does the distributed part: scheduling, moving results, and running a task again elsewhere when
the worker running it dies (``distributed.scheduler.allowed-failures``). Nothing here retries.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Iterator

from ..format.errors import TraceError

INSTALL_HINT = "pip install 'tb-attn[dask]'"
LOCAL = "local"
CONNECT_TIMEOUT = "20s"  # how long Client() keeps trying to reach a scheduler before giving up


class DaskUnavailable(RuntimeError):
    """dask.distributed is not installed, or the scheduler cannot be reached; str() says which."""


def _distributed():
    try:
        import distributed  # noqa: F401  (the scheduler, workers and client)
    except ImportError:
        raise DaskUnavailable(f"--dask needs Dask's distributed scheduler, which is not installed: {INSTALL_HINT}") \
            from None
    return distributed


def connect(address: str, *, workers: int | None = None):
    """A Client for ``address`` (tcp://host:port, or "local": a LocalCluster of one single-threaded
    worker process per core on this machine). The caller closes it (and its cluster, for "local")."""
    distributed = _distributed()
    if address == LOCAL:
        n = workers or os.cpu_count() or 1
        # One thread per process: the analysis holds the GIL most of the time, so threads would
        # queue behind each other; processes use every core.
        cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                           dashboard_address=None)
        return distributed.Client(cluster)
    if not address.strip():
        raise DaskUnavailable("--dask needs a scheduler address (tcp://host:8786) or 'local'")
    _check_address(address)
    try:
        return distributed.Client(address, timeout=CONNECT_TIMEOUT)
    except OSError as exc:
        raise DaskUnavailable(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    except (ValueError, TypeError) as exc:  # not an address at all: "foo", "tcp://[::"
        raise DaskUnavailable(f"not a Dask scheduler address: {address!r} ({exc}); "
                              "give tcp://host:8786 or 'local'") from None


def _check_address(address: str) -> None:
    """Refuse a malformed tcp/tls address before a Client starts its event loop: a loaded machine can
    take longer than Dask's 10 s to start that loop, and the user's typo then surfaced as Dask's
    internal AssertionError instead of this line."""
    from distributed.comm.addressing import get_address_host_port, parse_address

    try:
        scheme, _ = parse_address(address)  # no scheme means tcp
        if scheme in ("tcp", "tls"):  # other transports (ucx, inproc) are left to Dask
            get_address_host_port(address)
    except (ValueError, TypeError) as exc:
        raise DaskUnavailable(f"not a Dask scheduler address: {address!r} ({exc}); "
                              "give tcp://host:8786 or 'local'") from None


def close(client) -> None:
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()


def analyze_one(path: str, families: tuple = (), sources: tuple = ()) -> tuple[str, Any]:
    """The task a worker runs: ("ready", report JSON bytes) or ("error", one-line cause).
    ``families``: the client's --patterns rows (validated there) and ``sources`` their files; every
    task sets them, so a worker reused by another job never keeps that job's rows."""
    import msgspec

    from ..attention.user_table import install_rows
    from ..report.build import analyze_file

    install_rows(families, sources)
    try:
        report = analyze_file(path)
    except TraceError as exc:
        return "error", exc.cause
    except MemoryError:
        return "error", "not enough memory to analyse this trace"
    except Exception as exc:  # an engine bug must not look like a bad trace, nor fail the whole job
        return "error", f"analysis failed ({type(exc).__name__}: {exc}); please report this"
    return "ready", msgspec.json.encode(report)


def analyze_many(client, paths: Iterable[str], on_done: Callable[[int, int], None] | None = None
                 ) -> Iterator[tuple[str, dict[str, Any] | TraceError]]:
    """Yield (path, report or TraceError) for every path, in the order given, analysed on the cluster.
    ``on_done(finished, total)`` is called as results arrive (in any order). On Ctrl-C the pending
    tasks are cancelled and the finished reports are still yielded."""
    from distributed import as_completed

    from ..attention import patterns as P
    from ..attention.user_table import installed_files
    from ..report.layers import decode_report  # its layers as Layer Structs, as an in-process report's

    paths = [str(p) for p in paths]
    families, sources = P.user_families(), installed_files()  # --patterns rows, sent with every task
    # pure=False: a file's content may change between runs, so never reuse an earlier result by name.
    futures = client.map(analyze_one, paths, families=families, sources=sources, pure=False)
    done = 0
    results: dict[int, dict[str, Any] | TraceError] = {}
    position = {f.key: i for i, f in enumerate(futures)}
    try:
        for fut in as_completed(futures):
            i = position[fut.key]
            try:
                status, value = fut.result()
            except Exception as exc:  # e.g. KilledWorker: the task killed every worker that ran it
                status, value = "error", f"the Dask task failed: {type(exc).__name__}: {exc}"
            fut.release()  # the cluster may forget it now; only the decoded report is kept, here
            results[i] = decode_report(value) if status == "ready" else TraceError(paths[i], value)
            done += 1
            if on_done:
                on_done(done, len(paths))
    except KeyboardInterrupt:
        pass  # Ctrl-C keeps what is done (below); the pending tasks are cancelled
    finally:
        client.cancel([f for f in futures if not f.done()])
    for i, path in enumerate(paths):
        # Ctrl-C keeps what is done: the traces not analysed by then say so, one line each.
        yield path, results.get(i) or TraceError(path, "not analysed: interrupted (Ctrl-C) before its turn")
