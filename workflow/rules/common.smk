# Helpers shared by the rules files (Snakemake's lint wants functions apart from rules), the merged
# profile configuration CFG, the interpreter, and the functions the rules call for their inputs and parameters.
import importlib
import json
import os
import re
import shlex
import sys

from snakemake.exceptions import WorkflowError

from common.config import merged, profile_dirs, profile_overrides
from common.data.documents import SPLITS
from common.data.sources import CORPORA as REGISTRY_CORPORA
from common.models.external import missing_hub_sources
from common.qat.seeds import seed_cell
from workflow.step_code import step_code

# CFG: the configuration of the selected profile (config["profiles"][profile], after the profiles it `extends`,
# merged over the rest)
CFG = merged(config, profile_overrides(config.get("profiles", {}), config["profile"], "config"))
# Where the profile's files go: results/, reports/ and logs/ for the default profile, results/<profile>/,
# reports/<profile>/ and logs/<profile>/ for any other (common.config.profile_dirs), so that the results of every
# profile coexist; data/ (corpora, tokenizers: keyed by their own parameters) is shared.
RESULTS, REPORTS, LOGS = profile_dirs(config["profile"])


envvars:
    "PATH",


# Rules call `python`: the interpreter Snakemake runs under (the project's .venv), whose folder goes first on PATH.
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


# External models linked from a local folder or the hub (rule link_external_model; the others are converted)
LINKED_MODELS = [name for name, source in CFG["external_models"].items() if "path" in source or "hub" in source]
ARCHIVE_CORPUS = {source.archive_name: name for name, source in REGISTRY_CORPORA.items()}
TOKENIZER = f"data/tokenizers/{CFG['data']['pretrain']}-bpe{CFG['tokenizer']['vocab_size']}"
PRETRAIN = CFG["data"]["pretrain"]
CONDA_ENV = "../../envs/environment.yml"  # documents the software of every rule (the pinned venv is the reference)


def corpus_config(name):
    corpora = CFG["data"]["corpora"]
    if name not in corpora:
        raise ValueError(f"unknown corpus {name!r}; configured corpora: {', '.join(corpora)}")
    return corpora[name]


def local_model_folder(wildcards):
    """The folder of external model ``wildcards.name`` when it is a local one ({path: DIR}), else nothing."""
    source = CFG["external_models"][wildcards.name]
    return [source["path"]] if "path" in source else []


def unreachable_hub_inputs(jobs):
    """What the jobs about to run need from the Hugging Face hub and this machine cannot reach (offline and not in
    the cache; common.models.external.missing_hub_sources): the sources of the external models they link and of
    the ``datasets`` corpora they prepare, one line each with the command that fetches it. The Snakefile's onstart
    stops on any, before a job starts (a dry run plans without them)."""
    models, datasets = [], []
    for job in jobs:
        if job.rule.name == "link_external_model":
            models.append(CFG["external_models"][job.wildcards.name])
        elif job.rule.name == "prepare_corpus":
            source = corpus_config(job.wildcards.corpus)
            if "hf_dataset" in source:
                datasets.append((source["hf_dataset"], source.get("hf_config")))
    return missing_hub_sources(models, datasets)


def corpus_archive(wildcards):
    source = corpus_config(wildcards.corpus)
    if "registry" in source:
        return f"data/archives/{REGISTRY_CORPORA[source['registry']].archive_name}"
    return []


def corpus_origin(wildcards, input):
    source = corpus_config(wildcards.corpus)
    if "registry" in source:
        return f"--corpus {shlex.quote(source['registry'])} --archive {shlex.quote(str(input[0]))}"
    if "files" in source:
        return "--files " + " ".join(shlex.quote(p) for p in source["files"])
    flags = [f"--hf-dataset {shlex.quote(source['hf_dataset'])}", f"--text-field {source.get('text_field', 'text')}"]
    if source.get("hf_config"):
        flags.append(f"--hf-config {shlex.quote(source['hf_config'])}")
    if source.get("hf_splits"):  # the dataset's own splits (ours -> theirs), optionally joined verbatim
        flags.append("--hf-splits " + " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(source["hf_splits"].items())))
        if source.get("join") is not None:
            flags.append(f"--join {shlex.quote(source['join'].encode('unicode_escape').decode())}")  # \n escaped
    else:
        flags.append(f"--hf-split {shlex.quote(source.get('hf_split', 'train'))}")
    if source.get("max_rows"):
        flags.append(f"--max-rows {int(source['max_rows'])}")
    if source.get("streaming"):
        flags.append("--streaming")
    return " ".join(flags)


def corpus_fraction(split):
    """A corpus's validation or test fraction: its own (``data.corpora.<name>.<split>``) or ``data.<split>``."""
    return lambda w: corpus_config(w.corpus).get(split, CFG["data"][split])


def train_config_json(model):
    settings = CFG["base_models"][model]["train"]
    return shlex.quote(json.dumps({"seed": CFG["seed"], **settings}, sort_keys=True))


def quantization_args(name):
    settings = CFG.get("quantization", {})
    if name not in settings:
        raise ValueError(f"unknown quantization {name!r}; configured: {', '.join(settings)}")
    entry = settings[name]
    recipe = entry["recipe"]
    args = [f"--recipe {shlex.quote(recipe if isinstance(recipe, str) else json.dumps(recipe, sort_keys=True))}"]
    if entry.get("activations"):
        args.append("--activations")
    for key in ("include", "exclude"):
        if entry.get(key):
            args.append(f"--{key} {shlex.quote(entry[key])}")
    for key in ("skip_first", "skip_last"):
        if entry.get(key):
            args.append(f"--{key.replace('_', '-')} {int(entry[key])}")
    if entry.get("skip_proportion"):
        args.append("--skip-proportion " + " ".join(repr(float(v)) for v in entry["skip_proportion"]))
    return " ".join(args)


# reports (workflow/rules/report.smk); PAPERS is set by the Snakefile once every paper is included
def report_notice_flag():
    """``--notice TEXT`` of the profile's ``report_notice`` (what its reports must say first, e.g. that every model is
    a stand-in), or nothing."""
    notice = CFG.get("report_notice")
    return f"--notice {shlex.quote(notice)}" if notice else ""


def report_contexts(wildcards):
    return expand(f"{RESULTS}/{{paper}}/report/context.json", paper=PAPERS)


def report_pages(wildcards):
    return expand(f"{REPORTS}/{{paper}}.html", paper=PAPERS)


def figure_step(kind, inputs, options=""):
    """The plan of one figure id of a paper: the paper's ``figure`` step draws it as ``<kind>`` from ``inputs`` (in
    the order the step reads them) with ``options`` (figure_arguments)."""
    return {"kind": kind, "inputs": inputs, "options": options}


def figure_inputs(plans):
    """What a paper's figures read (``plans``: figure id -> figure_step), each file once, in order."""
    return list(dict.fromkeys(path for plan in plans.values() for path in plan["inputs"]))


def figure_pngs(plans, folder, category):
    """The PNG of every figure of ``plans`` in ``folder``, each in Snakemake's report under ``category``, its id the
    subcategory (the paper's caption template, report/figure.rst, describes it)."""
    marks = {"caption": "report/figure.rst", "category": category}
    return [report(f"{folder}/{figure}.png", subcategory=figure, **marks) for figure in plans]


def figure_arguments(plans, folder, flag):
    """The ``--figure`` flags of a paper's ``figures`` step, which draws every figure of ``plans`` (figure id ->
    figure_step) in one process, one job for the report's figures: per figure, the arguments its ``figure`` step
    takes, ``<kind> <flag> <inputs> <options> --png <folder>/<id>.png --pdf <folder>/<id>.pdf``, quoted as one.
    ``flag`` ``--inputs`` passes every input, ``--summary`` the first (the others are named in the options)."""
    flags = []
    for figure, plan in plans.items():
        inputs = plan["inputs"] if flag == "--inputs" else plan["inputs"][:1]
        files = [f"--{ext} {shlex.quote(f'{folder}/{figure}.{ext}')}" for ext in ("png", "pdf")]
        arguments = [plan["kind"], flag, *map(shlex.quote, inputs), plan["options"], *files]
        flags.append(f"--figure {shlex.quote(' '.join(filter(None, arguments)))}")
    return " ".join(flags)


# papers (papers/*/helpers.smk)
def json_arg(value):
    """``value`` as one shell-quoted canonical JSON argument (a rule's --config-json)."""
    return shlex.quote(json.dumps(value, sort_keys=True))


def paper_config(key):
    """The configuration of paper ``key`` (folder ``papers/<key>``, section ``<key>`` of its ``config.yaml``): the
    file loaded into ``config`` (as a ``configfile:``, the command line's ``--config`` still on top), validated
    against ``papers/<key>/config.schema.yaml``, the selected profile merged in and checked by the paper's
    ``settings.profile_config``, and the merged configuration validated against the schema again."""
    folder = f"papers/{key}"
    workflow.configfile(f"{folder}/config.yaml")
    if key not in config:
        raise ValueError(f"{folder}/config.yaml has no {key!r} section (its paper's settings.KEY)")
    schema = os.path.join(workflow.basedir, folder, "config.schema.yaml")
    validate_paper_config(config[key], schema, f"{folder}/config.yaml")
    active = importlib.import_module(f"papers.{key}.settings").profile_config(config[key], config["profile"])
    validate_paper_config(active, schema, f"{folder}/config.yaml with profile {config['profile']!r} merged in")
    return active


def study_base_model(paper, key):
    """The model paper ``key``'s study trains from: its config's ``base_model`` (an embedded base model or an
    external model: a local checkpoint or a hub id in the paper profile), or the workflow's ``base_model`` when
    that is null; ValueError naming a name that is neither."""
    name = paper.get("base_model") or CFG["base_model"]
    if name not in CFG["base_models"] and name not in CFG["external_models"]:
        raise ValueError(
            f"{key}.base_model {name!r} is neither a workflow base model ({', '.join(CFG['base_models'])}) nor an"
            f" external model ({', '.join(CFG['external_models'])})"
        )
    return name


def pretraining_metadata(models):
    """The ``lowbit_metadata.json`` of every embedded base model among ``models`` (what a report's provenance
    reads the pretraining time from; external models were not trained here)."""
    return [f"{model_path(name)}/lowbit_metadata.json" for name in dict.fromkeys(models) if name in CFG["base_models"]]


def validate_paper_config(data, schema, what):
    """``validate(data, schema)`` with an error naming ``what`` was validated (the file and the profile)."""
    try:
        validate(data, schema)
    except WorkflowError as err:
        raise WorkflowError(f"{what} does not satisfy {os.path.relpath(schema, workflow.basedir)}", err) from None


SWEEP_MODEL = re.compile(r"(?P<model>[A-Za-z0-9_]+)-c(?P<factor>[0-9][0-9.e+-]*)")  # <model>-c<factor>


def sweep_factor(text):
    """Whether ``text`` is a positive finite factor written as ``f"{factor:g}"`` (``0.1``, ``1``, ``1e-05``)."""
    try:
        factor = float(text)
    except ValueError:
        return False
    return 0 < factor < float("inf") and f"{factor:g}" == text


def model_path(name):
    """The checkpoint folder of model ``name``: ``results/models/<base|external>/<name>``, or for a sweep point
    ``<model>-c<factor>`` of a base or external model (``smoke-c0.1``, the factor as ``f"{c:g}"``) the rescaled
    checkpoint ``results/models/sweep/<model>/c<factor>`` (rule rescale_model), the model itself for factor 1 (the
    rescaling by 1 is the identity, bit for bit). ValueError naming an unknown name and the accepted forms."""
    if name in CFG["base_models"]:
        return f"{RESULTS}/models/base/{name}"
    if name in CFG["external_models"]:
        return f"{RESULTS}/models/external/{name}"
    sweep = SWEEP_MODEL.fullmatch(name)
    known = [*CFG["base_models"], *CFG["external_models"]]
    if sweep and sweep["model"] in known and sweep_factor(sweep["factor"]):
        if float(sweep["factor"]) == 1:
            return model_path(sweep["model"])
        return f"{RESULTS}/models/sweep/{sweep['model']}/c{sweep['factor']}"
    raise ValueError(
        f"unknown model {name!r}: neither a base model ({', '.join(CFG['base_models'])}), an external model"
        f" ({', '.join(CFG['external_models'])}) nor a sweep point <model>-c<factor> of one of them, the factor"
        f" positive and written as f'{{factor:g}}' (e.g. {known[0]}-c0.1)"
    )


def model_dir(wildcards):
    """The checkpoint folder of a rule's ``model`` wildcard (``model_path``)."""
    return model_path(wildcards.model)


def sweep_models(model, factors=None):
    """The sweep points of ``model``: ``<model>-c<factor>`` for every factor of ``factors`` (None: the workflow's
    ``sweep.factors``; ``[1]``: the model itself, as the papers evaluate it)."""
    return [f"{model}-c{factor:g}" for factor in (CFG["sweep"]["factors"] if factors is None else factors)]


def compute_flags(training=False):
    """``--device D --dtype T`` of config ``compute`` (common.compute.Compute), the flags of every model step; a
    training step's ``--device D`` only (its mixed precision is the run's own ``train.bf16``)."""
    flags = f"--device {CFG['compute']['device']}"
    return flags if training else f"{flags} --dtype {CFG['compute']['dtype']}"


def launcher(wildcards, resources):
    """How a training step starts: ``python``, or ``torchrun --standalone --nproc_per_node=N`` when the profile gives
    the job N > 1 GPUs (resource ``gpu``, e.g. workflow/profiles/slurm-gpu): one process per GPU, data parallel
    (common.train; the global batch is then micro_batch_size x grad_accum x N, part of the run's resume record)."""
    gpus = int(getattr(resources, "gpu", 0) or 0)
    return "python" if gpus <= 1 else f"torchrun --standalone --nproc_per_node={gpus}"


def lm_eval_options():
    """The command-line options of ``python -m common.eval lm-eval`` from config ``lm_eval`` (batch size, and the
    limit, few-shot count and include path when set) and ``compute`` (device and dtype)."""
    cfg = CFG["lm_eval"]
    options = [f"--batch-size {cfg['batch_size']}", compute_flags()]
    for key, flag in (("limit", "--limit"), ("num_fewshot", "--num-fewshot"), ("include_path", "--include-path")):
        if cfg[key] is not None:
            options.append(f"{flag} {cfg[key]}")
    return " ".join(options)


def training_split(corpus, split, model):
    """What a QAT study's training step reads for ``split`` of ``corpus`` with ``model``'s tokenizer: the JSONL split,
    or with ``data.token_shards`` its token shards (rule token_shards)."""
    if CFG["data"].get("token_shards", False):
        return f"{RESULTS}/tokens/{corpus}/{model}/{split}"
    return f"data/corpora/{corpus}/{split}.jsonl"


def seed_cells(runs, seeds):
    """``<run>/seed<k>`` of every run and seed (common.qat.seeds.seed_cell): the training cells of a QAT paper."""
    return [seed_cell(run, seed) for run in runs for seed in seeds]
