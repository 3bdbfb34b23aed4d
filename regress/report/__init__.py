"""Reports of a comparison, one module each, pure functions returning strings.

- `regress.report.markdown.render_markdown`: a PR comment or $GITHUB_STEP_SUMMARY;
- `regress.report.json_report.render_json`: the same content as JSON;
- `regress.report.lm_eval`: lm-eval compatible results and samples from `regress eval`.

Nothing is imported here, so `regress eval` does not load the statistics (scipy,
statsmodels) that only the comparison reports need.
"""
