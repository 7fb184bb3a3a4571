# Reports: every paper's pipeline ends in results/<paper>/report/context.json (figures, tables, claims with
# computed verdicts, provenance); these rules render it to a self-contained HTML report, LaTeX (PDF with
# latexmk), a SHA256SUMS over every cited artifact, and reports/index.html linking every report.


rule render_report:
    """The HTML report (figures embedded, no network address), its LaTeX, and SHA256SUMS of what it cites."""
    input:
        f"{RESULTS}/{{paper}}/report/context.json",
    output:
        html=f"{REPORTS}/{{paper}}.html",
        tex=f"{REPORTS}/{{paper}}.tex",
        sums=f"{REPORTS}/{{paper}}.SHA256SUMS",
    log:
        f"{LOGS}/render_report/{{paper}}.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.report.__main__:render", "common/report/templates"),
        notice=report_notice_flag(),
    shell:
        "python -m common.report render --context {input} --html {output.html} --tex {output.tex}"
        " --sums {output.sums} {params.notice} > {log} 2>&1"


rule report_pdf:
    """The PDF of a report's LaTeX (needs latexmk; `make reports` asks for it only when latexmk is installed)."""
    input:
        f"{REPORTS}/{{paper}}.tex",
    output:
        f"{REPORTS}/{{paper}}.pdf",
    log:
        f"{LOGS}/report_pdf/{{paper}}.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.report.__main__:pdf"),
    shell:
        "python -m common.report pdf --tex {input} > {log} 2>&1"


rule report_index:
    """reports/index.html: a link to every paper's report with its verdict counts."""
    input:
        contexts=report_contexts,
        reports=report_pages,
    output:
        f"{REPORTS}/index.html",
    log:
        f"{LOGS}/report_index.log",
    conda:
        CONDA_ENV
    params:
        code=step_code("common.report.__main__:index", "common/report/templates"),
        profile=config["profile"],
        notice=report_notice_flag(),
    shell:
        "python -m common.report index --contexts {input.contexts} --reports {input.reports}"
        " --profile {params.profile} {params.notice} --out {output} > {log} 2>&1"
