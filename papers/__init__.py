"""The four paper pipelines: each ``papers/<paper>/`` holds its Snakemake rules, config, schema and thin
modules that turn ``common`` computations into cells, figures, claims and a report context, and the method code
that only its paper uses (``papers.winq.method``, ``papers.winq.diagnostics``)."""
