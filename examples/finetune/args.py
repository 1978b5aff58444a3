"""The workflow's one input file, args.yaml: read strictly, checked, every problem reported at once.

Plain Python and PyYAML only, so every step reads it the same way: the download and preparation in a Studio space,
the trainer and the evaluation in the training image or a venv, the Slurm launcher on a node (through
`python3 args.py shell args.yaml`, which prints shell assignments) and the EKS manifest renderer.

Errors name the key, the value and what is allowed: `training.micro_batch_size: 0 — an integer >= 1`.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Optional, get_args, get_origin, get_type_hints

import yaml


class ArgsError(ValueError):
    def __init__(self, source: str, errors: list[str]):
        self.source, self.errors = source, errors
        super().__init__(f"{source}: {len(errors)} problem(s)\n" + "\n".join(f"  {e}" for e in errors))


# ---------------------------------------------------------------------------------------------- shape
@dataclass(frozen=True)
class Model:
    id: str  # Hugging Face Hub repository, e.g. Qwen/Qwen2.5-0.5B
    revision: str  # a commit of that repository: the download is reproducible
    license: str = ""  # documentation only


@dataclass(frozen=True)
class Dataset:
    id: str  # Hub dataset repository, or a local .jsonl path (absolute)
    revision: str = ""  # commit of the dataset repository (not for a local file)
    file: str = ""  # the JSON-lines file in that repository
    license: str = ""
    instruction_field: str = "instruction"
    context_field: str = ""  # optional; empty: no context
    response_field: str = "response"
    eval_samples: int = 200  # held out for evaluation, chosen by a seeded hash of each record
    max_samples: int = 0  # 0: all


@dataclass(frozen=True)
class Lora:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("all-linear",)


@dataclass(frozen=True)
class Training:
    max_seq_len: int = 1024
    global_batch_size: int = 64  # constant at every world size: accumulation makes up the rest
    micro_batch_size: int = 2
    max_steps: int = 500
    learning_rate: float = 2e-4
    warmup_steps: int = 20
    min_lr_ratio: float = 0.1  # cosine decay to learning_rate * min_lr_ratio
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    seed: int = 42
    checkpoint_every: int = 50
    keep_checkpoints: int = 2
    quantization: str = "auto"  # auto: 4-bit (QLoRA) on GPUs, none on CPUs; or 4bit / none
    lora: Lora = Lora()


@dataclass(frozen=True)
class Evaluation:
    samples: int = 100  # from the held-out split
    max_new_tokens: int = 128


@dataclass(frozen=True)
class Mlflow:
    tracking_arn: str = ""  # the platform's SageMaker MLflow tracking server; empty: no logging
    experiment: str = "finetune"
    system_metrics_interval_seconds: float = 10.0


@dataclass(frozen=True)
class Slurm:
    nodes: int = 2
    gpus_per_node: int = 8
    partition: str = ""  # empty: the cluster's default partition
    runtime: str = "container"  # container (pyxis) or venv (a venv on FSx)
    venv: str = ""  # runtime venv: its directory on FSx


@dataclass(frozen=True)
class ElasticSizes:
    min_replicas: int = 1
    max_replicas: int = 2
    replica_increment_step: int = 1
    graceful_shutdown_timeout_seconds: int = 600


@dataclass(frozen=True)
class Eks:
    team: str = "research"
    user: str = ""  # a member of the team: the job runs as them, with their Studio files (issue 25)
    priority: str = "training"
    instance_type: str = "ml.p5.48xlarge"
    gpus_per_pod: int = 8
    efa_per_pod: int = 0
    elastic: ElasticSizes = ElasticSizes()


@dataclass(frozen=True)
class Args:
    name: str  # run name: directories, MLflow run name, Kubernetes job name
    image: str  # the training image built from Dockerfile, pinned by tag or digest
    model: Model
    dataset: Dataset
    training: Training = Training()
    evaluation: Evaluation = Evaluation()
    mlflow: Mlflow = Mlflow()
    slurm: Slurm = Slurm()
    eks: Eks = Eks()


# ---------------------------------------------------------------------------------------------- rules
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_IMAGE_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._:/-]*")
_MLFLOW_ARN = re.compile(r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:mlflow-tracking-server/[a-zA-Z0-9-]{1,256}")
_INSTANCE = re.compile(r"ml\.[a-z0-9-]+\.[a-z0-9]+")


def _pinned_image(image: str) -> bool:
    name, _, digest = image.partition("@")
    colon = name.rfind(":")
    tag = name[colon + 1 :] if colon > name.rfind("/") else ""
    return bool(_IMAGE_NAME.fullmatch(name)) and (
        bool(_DIGEST.fullmatch(digest)) if digest else tag not in ("", "latest")
    )


def semantic_errors(a: Args) -> list[str]:
    errors: list[str] = []
    add = errors.append

    def check(ok: bool, key: str, value: Any, allowed: str) -> None:
        if not ok:
            add(f"{key}: {value!r} — {allowed}")

    check(
        bool(_NAME.fullmatch(a.name)),
        "name",
        a.name,
        "1-40 lowercase letters, digits and '-', starting and ending with a letter or digit",
    )
    check(
        _pinned_image(a.image),
        "image",
        a.image,
        "a pinned image: repository:tag (not 'latest') or repository@sha256:<64 hex>",
    )
    check(bool(_REPO.fullmatch(a.model.id)), "model.id", a.model.id, "a Hub repository such as Qwen/Qwen2.5-0.5B")
    check(
        bool(_COMMIT.fullmatch(a.model.revision)),
        "model.revision",
        a.model.revision,
        "a 40-hex commit of the model repository, so every download is the same",
    )
    if a.dataset.id.startswith("/"):
        check(a.dataset.id.endswith(".jsonl"), "dataset.id", a.dataset.id, "a local file must be JSON lines (.jsonl)")
    else:
        check(
            bool(_REPO.fullmatch(a.dataset.id)),
            "dataset.id",
            a.dataset.id,
            "a Hub dataset such as databricks/databricks-dolly-15k, or an absolute path to a .jsonl file",
        )
        check(
            bool(_COMMIT.fullmatch(a.dataset.revision)),
            "dataset.revision",
            a.dataset.revision,
            "a 40-hex commit of the dataset repository",
        )
        check(
            a.dataset.file.endswith(".jsonl") and ".." not in a.dataset.file.split("/"),
            "dataset.file",
            a.dataset.file,
            "the repository's JSON-lines file, e.g. databricks-dolly-15k.jsonl",
        )
    check(a.dataset.eval_samples >= 1, "dataset.eval_samples", a.dataset.eval_samples, "an integer >= 1")
    check(a.dataset.max_samples >= 0, "dataset.max_samples", a.dataset.max_samples, "0 (all) or more")

    t = a.training
    for key in (
        "max_seq_len",
        "global_batch_size",
        "micro_batch_size",
        "max_steps",
        "checkpoint_every",
        "keep_checkpoints",
    ):
        check(getattr(t, key) >= 1, f"training.{key}", getattr(t, key), "an integer >= 1")
    check(t.warmup_steps >= 0, "training.warmup_steps", t.warmup_steps, "an integer >= 0")
    check(0 < t.learning_rate < 1, "training.learning_rate", t.learning_rate, "a number between 0 and 1")
    check(0 <= t.min_lr_ratio <= 1, "training.min_lr_ratio", t.min_lr_ratio, "a number from 0 to 1")
    check(t.weight_decay >= 0, "training.weight_decay", t.weight_decay, "a number >= 0")
    check(t.max_grad_norm > 0, "training.max_grad_norm", t.max_grad_norm, "a number > 0")
    check(t.quantization in ("auto", "4bit", "none"), "training.quantization", t.quantization, "auto, 4bit or none")
    check(t.lora.r >= 1, "training.lora.r", t.lora.r, "an integer >= 1")
    check(t.lora.alpha >= 1, "training.lora.alpha", t.lora.alpha, "an integer >= 1")
    check(0 <= t.lora.dropout < 1, "training.lora.dropout", t.lora.dropout, "a number from 0 to below 1")
    check(
        len(t.lora.target_modules) >= 1,
        "training.lora.target_modules",
        list(t.lora.target_modules),
        "all-linear, or a list of module names such as [q_proj, v_proj]",
    )
    check(a.evaluation.samples >= 1, "evaluation.samples", a.evaluation.samples, "an integer >= 1")
    check(a.evaluation.max_new_tokens >= 1, "evaluation.max_new_tokens", a.evaluation.max_new_tokens, "an integer >= 1")
    check(
        not a.mlflow.tracking_arn or bool(_MLFLOW_ARN.fullmatch(a.mlflow.tracking_arn)),
        "mlflow.tracking_arn",
        a.mlflow.tracking_arn,
        "empty, or arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name>",
    )
    check(
        a.mlflow.system_metrics_interval_seconds >= 0.1,
        "mlflow.system_metrics_interval_seconds",
        a.mlflow.system_metrics_interval_seconds,
        "a number of seconds >= 0.1",
    )

    s = a.slurm
    check(s.nodes >= 1, "slurm.nodes", s.nodes, "an integer >= 1")
    check(s.gpus_per_node >= 1, "slurm.gpus_per_node", s.gpus_per_node, "an integer >= 1")
    check(s.runtime in ("container", "venv"), "slurm.runtime", s.runtime, "container (pyxis) or venv")
    if s.runtime == "venv":
        check(s.venv.startswith("/"), "slurm.venv", s.venv, "with runtime venv: the venv's absolute path on FSx")
    _check_divisible(errors, "slurm", t, [s.nodes * s.gpus_per_node])

    e = a.eks
    check(
        bool(_INSTANCE.fullmatch(e.instance_type)),
        "eks.instance_type",
        e.instance_type,
        "a SageMaker instance type such as ml.g5.12xlarge",
    )
    check(e.gpus_per_pod >= 1, "eks.gpus_per_pod", e.gpus_per_pod, "an integer >= 1")
    el = e.elastic
    check(
        1 <= el.min_replicas <= el.max_replicas,
        "eks.elastic.min_replicas",
        el.min_replicas,
        f"an integer from 1 to max_replicas ({el.max_replicas})",
    )
    check(
        el.replica_increment_step >= 1,
        "eks.elastic.replica_increment_step",
        el.replica_increment_step,
        "an integer >= 1",
    )
    if not errors:
        sizes = range(el.min_replicas, el.max_replicas + 1, el.replica_increment_step)
        _check_divisible(errors, "eks", t, [n * e.gpus_per_pod for n in sizes])
    return errors


def _check_divisible(errors: list[str], where: str, t: Training, world_sizes: list[int]) -> None:
    if t.micro_batch_size < 1 or t.global_batch_size < 1:
        return  # already reported
    bad = [w for w in world_sizes if w >= 1 and t.global_batch_size % (w * t.micro_batch_size)]
    if bad:
        errors.append(
            f"training.global_batch_size: {t.global_batch_size} is not divisible by world size × "
            f"micro_batch_size at {where} world size(s) {bad} (micro_batch_size {t.micro_batch_size}); "
            "the global batch stays constant through gradient accumulation, so every world size must "
            "divide it"
        )


# ---------------------------------------------------------------------------------------------- loading
class _StrictLoader(yaml.SafeLoader):
    """YAML 1.2 booleans only (no yes/no/on/off) and no duplicate keys."""


_StrictLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
}
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf"))


def _mapping(loader, node, deep=False):
    keys = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in keys:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        keys.add(key)
    return loader.construct_mapping(node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _build(cls: type, data: Any, path: str, errors: list[str]) -> Any:
    if not isinstance(data, dict):
        errors.append(
            f"{path or '<root>'}: {type(data).__name__} — a mapping with keys {', '.join(f.name for f in fields(cls))}"
        )
        return None
    hints = get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    for key in data:
        if key not in known:
            errors.append(f"{path + '.' if path else ''}{key}: unknown key; allowed here: {', '.join(known)}")
    values = {}
    for name, f in known.items():
        key = f"{path + '.' if path else ''}{name}"
        if name not in data:
            if f.default is MISSING and f.default_factory is MISSING:  # required
                errors.append(f"{key}: missing; this key is required")
            continue
        values[name] = _value(hints[name], data[name], key, errors)
    try:
        return cls(**{k: v for k, v in values.items() if v is not _BAD})
    except TypeError:
        return None


_BAD = object()


def _value(hint: Any, value: Any, key: str, errors: list[str]) -> Any:
    if is_dataclass(hint):
        built = _build(hint, value, key, errors)
        return _BAD if built is None else built
    if get_origin(hint) is tuple:
        items = value if isinstance(value, list) else [value] if isinstance(value, str) else None
        if items is None or not all(isinstance(i, str) and i for i in items):
            errors.append(f"{key}: {value!r} — a name or a list of names")
            return _BAD
        return tuple(items)
    if hint is Optional[str]:  # noqa: UP045 - compares with typing.Optional[str] itself, which `str | None` is not
        hint = get_args(hint)[0]
    ok = {
        str: isinstance(value, str),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, (int, float)) and not isinstance(value, bool),
    }[hint]
    if not ok:
        errors.append(f"{key}: {value!r} — {dict(str='a string', int='an integer', float='a number')[hint.__name__]}")
        return _BAD
    return float(value) if hint is float else value


def parse_args_data(data: Any, source: str = "<args>") -> Args:
    errors: list[str] = []
    args = _build(Args, data, "", errors)
    if errors or args is None:
        raise ArgsError(source, errors or ["<root>: could not be read"])
    errors = semantic_errors(args)
    if errors:
        raise ArgsError(source, errors)
    return args


def load_args(path: str | Path) -> Args:
    path = Path(path)
    try:
        data = yaml.load(path.read_text(), Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except FileNotFoundError:
        raise ArgsError(str(path), [f"args: {str(path)!r} — file not found"]) from None
    except yaml.YAMLError as exc:
        raise ArgsError(str(path), [f"YAML: {exc}".replace("\n", " ")]) from None
    return parse_args_data(data, str(path))


# ---------------------------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class Layout:
    """Where each step reads and writes, below the work directory and the checkpoint directory the launcher gives.

    work_dir/model            the downloaded model (download_model.py)
    work_dir/data             train.jsonl, eval.jsonl, manifest.json (prepare_data.py)
    work_dir/eval             predictions and ROUGE of the base and the fine-tuned model (evaluate.py)
    checkpoint_dir/step-N     sharded training state; checkpoint_dir/adapter: the final LoRA adapter
    """

    work_dir: Path
    checkpoint_dir: Path
    model_dir: Path = field(init=False)
    data_dir: Path = field(init=False)
    eval_dir: Path = field(init=False)
    adapter_dir: Path = field(init=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "model_dir", self.work_dir / "model")
        set_(self, "data_dir", self.work_dir / "data")
        set_(self, "eval_dir", self.work_dir / "eval")
        set_(self, "adapter_dir", self.checkpoint_dir / "adapter")


def layout_from(ns: argparse.Namespace) -> Layout:
    work = Path(ns.work_dir or os.environ.get("FINETUNE_WORK_DIR") or "")
    if not str(work) or not work.is_absolute():
        raise SystemExit("--work-dir (or FINETUNE_WORK_DIR): an absolute directory on FSx is required")
    checkpoint = Path(ns.checkpoint_dir or os.environ.get("CHECKPOINT_DIR") or work / "checkpoints")
    return Layout(work_dir=work, checkpoint_dir=checkpoint)


def common_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--args", default=os.environ.get("FINETUNE_ARGS", "args.yaml"), help="the args.yaml")
    parser.add_argument("--work-dir", help="model/, data/ and eval/ go here (default: $FINETUNE_WORK_DIR)")
    parser.add_argument("--checkpoint-dir", help="checkpoints (default: $CHECKPOINT_DIR, else <work-dir>/checkpoints)")
    return parser


def step_inputs(doc: str, argv: list[str] | None) -> tuple[Args, Layout]:
    """A step's command line: its args.yaml and layout; a bad args.yaml exits 1 with the errors, not a traceback."""
    ns = common_parser(doc.splitlines()[0]).parse_args(argv)
    try:
        a = load_args(ns.args)
    except ArgsError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(1) from None
    return a, layout_from(ns)


def shell_assignments(a: Args) -> str:
    """What the Slurm launcher needs, as `KEY=value` lines for `eval`."""
    values = {
        "FT_NAME": a.name,
        "FT_IMAGE": a.image,
        "FT_NODES": a.slurm.nodes,
        "FT_GPUS_PER_NODE": a.slurm.gpus_per_node,
        "FT_PARTITION": a.slurm.partition,
        "FT_RUNTIME": a.slurm.runtime,
        "FT_VENV": a.slurm.venv,
        "FT_MLFLOW_ARN": a.mlflow.tracking_arn,
    }
    return "".join(f"{k}={shlex.quote(str(v))}\n" for k, v in values.items())


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("check", "shell"):
        print("usage: args.py check|shell ARGS_YAML", file=sys.stderr)
        return 2
    try:
        args = load_args(argv[1])
    except ArgsError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(shell_assignments(args) if argv[0] == "shell" else f"{argv[1]}: ok", end="" if argv[0] == "shell" else "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
