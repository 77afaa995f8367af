import os

from setuptools import Extension, find_packages, setup

version = {}
with open("tb_attn_plugin/format/version.py") as fh:
    exec(fh.read(), version)

setup(
    name="tb-attn",
    version=version["__version__"],
    description="TensorBoard plugin and CLI that make attention visible in PyTorch profiler traces",
    # README.md may not exist yet in a fresh skeleton; installing must not depend on it.
    long_description=open("README.md").read() if os.path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.10",
    packages=find_packages(include=["tb_attn_plugin", "tb_attn_plugin.*"]),
    package_data={"tb_attn_plugin": ["static/*", "static/**/*", "report/schema.json", "plugin/routes.schema.json"]},
    include_package_data=True,
    # The engine needs msgspec (decoding) and numpy (columns: grouped sums, sorts, joins); torch and
    # tensorboard are for the collector and the plugin.
    # tomli reads --patterns / TB_ATTN_PATTERNS files where the standard library has no tomllib
    # google-re2: users' kernel patterns are matched by RE2, which never backtracks
    # (attention/safe_regex.py), so no pattern file can hang the CLI or TensorBoard.
    install_requires=["msgspec>=0.18", "numpy>=1.24", 'tomli>=1.1; python_version<"3.11"', "google-re2>=1.1"],
    # A C scanner that drops unused events before decoding (about a third of the analysis time on
    # real traces) and writes the kept ones' records (times, threads, ids) that become numpy columns;
    # it also holds the op tree's one sequential pass (a stack over numpy columns).
    # Optional: without a compiler the install still succeeds and the engine decodes every event
    # and nests the ops in Python, with the same results. The other reads
    # CUDA memory snapshot pickles into columns (a third of the memory the unpickler's objects take);
    # without it snapshots load with the plain unpickler, same results.
    ext_modules=[Extension("tb_attn_plugin.trace._scanner", ["tb_attn_plugin/trace/_scanner.c"],
                           optional=True),
                 Extension("tb_attn_plugin.memory._snapshot_decode", ["tb_attn_plugin/memory/_snapshot_decode.c"],
                           optional=True)],
    extras_require={
        "plugin": ["tensorboard>=2.14", "werkzeug>=2.0"],
        "collector": ["torch>=2.1", "tensorboard>=2.14"],
        "remote": ["fsspec>=2023.1"],
        # faster gzip inflation for .json.gz traces (ISA-L); without it the standard library inflates
        "fast": ["isal>=1.0"],
        # tb-attn report --dask / TB_ATTN_DASK_SCHEDULER: per-trace analyses on a Dask cluster
        "dask": ["dask[distributed]>=2023.1"],
        # collector callbacks and the demo's tiny Llama; tests skip these parts when absent
        "integrations": ["transformers>=4.48", "accelerate>=1.0", "lightning>=2.0"],
        # python -m demo: its tiny Llama variants (hf-eager, hf-sdpa); transformers needs no CUDA torch of its own
        "demo": ["transformers>=4.48"],
        "test": [
            "pytest>=7", "hypothesis>=6", "orjson>=3", "fsspec>=2023.1", "jsonschema>=4",
            # the plugin tests serve an s3:// logdir from a local S3-compatible server
            "moto[server]>=5", "s3fs>=2023.1",
            # the coexistence test loads the deprecated PyTorch Profiler tab next to ours
            "torch-tb-profiler>=0.4",
            # the lint (ruff.toml) and the type check of format/ and report/ in scripts/test.sh, pinned so
            # a new release's new rules do not turn a clean clone red
            "ruff==0.17.6", "mypy==2.4.1",
        ],
    },
    entry_points={
        "console_scripts": ["tb-attn=tb_attn_plugin.cli:run"],
        "tensorboard_plugins": ["tb_attn=tb_attn_plugin.plugin.loader:AttentionPluginLoader"],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "License :: OSI Approved :: MIT License",
    ],
)
