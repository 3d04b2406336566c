"""dmlgpu's tools, shipped beside the library but not part of it: the demo (`demo`), the benchmark
harness (`bench`, `bench_runtime`, `bench_report`). `python -m dmlgpu demo|bench` imports them on
demand; `import dmlgpu` never does. They use only dmlgpu's public modules."""
