"""Speed and resources (`regress bench`), the latency gate and the serving benchmark.

- `run`: BenchOptions -> BenchRun (llama-bench micro tests, request latency, resources);
- `micro`, `latency`, `serving`, `resources`, `summary`: the measurements and their summaries;
- `shift`, `speed_gate`: the interleaved A/B latency gate;
- `render`: Markdown and JSON Lines; `contenders`: figures for `regress compare`.

Nothing is imported here: the resource sampler's process imports only what it needs.
"""
