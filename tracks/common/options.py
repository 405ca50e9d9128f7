"""The command line of a training run: every config option, with the preset's value in --help.

`train_parser` builds the parser `train` and `diagnose` share; its options
default to None so that "not given" stays visible (`config_from_args` fills
them from the preset, `--resume` refuses them). Every parser of the tracks
is a `OneLineParser`: a bad argument is one line and exit code 2. Nothing
here imports TensorFlow or Keras: `--help`, `--version` and every refusal
answer before they load.
"""

import argparse
import ast
import dataclasses
import importlib.metadata
import importlib.util
import pathlib

from tracks.common.config import add_config_options, option_name, run_directory_option

# Options that say how or where a run computes, not what it computes: given
# with --resume they apply (another machine, another number of GPUs). Every
# other option comes from the run's config.json.
APPLIED_ON_RESUME = ("data_dir", "xla", "strategy", "steps_per_execution")


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line ("error: ..."), exit code 2, without the usage block."""

    def error(self, message):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


class _PresetParser(OneLineParser):
    """An ArgumentParser whose --help gives every config option's value in the chosen preset.

    The options default to None (so that "not given" is visible to
    `config_from_args`); their effective defaults come from the preset:
    `--preset NAME` (`_PresetAction`), read once by argparse as every option
    is, writes NAME's values into the options' help, or the track's default
    preset's where none is given. --help is printed once every option is
    read, so that a --preset after it counts too.
    """

    def setup_preset_help(self, config_cls, presets):
        self._presets = presets
        fields = {field.name for field in dataclasses.fields(config_cls) if field.metadata.get("cli") is not False}
        self._config_actions = [action for action in self._actions if action.dest in fields]
        self._base_help = {action.dest: action.help or "" for action in self._config_actions}

    def show_preset(self, preset):
        """Each config option's help ends with its value in `preset` (an unknown name changes nothing)."""
        if preset in getattr(self, "_presets", {}):
            config = self._presets[preset]
            for action in self._config_actions:
                value = _shown(getattr(config, action.dest)).replace("%", "%%")
                action.help = f"{self._base_help[action.dest]} [{preset}: {value}]".strip()

    def parse_known_args(self, args=None, namespace=None):
        self.show_preset(self.get_default("default_preset"))
        self.help_asked = False
        parsed = super().parse_known_args(args, namespace)
        if self.help_asked:
            self.print_help()
            self.exit()
        return parsed


class _PresetAction(argparse.Action):
    """--preset NAME: stored, and NAME's values shown in --help (`_PresetParser.show_preset`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        parser.show_preset(values)


class _HelpAfterParsing(argparse.Action):
    """-h/--help: asks the parser to print the help once every option is read (`_PresetParser`)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.help_asked = True


def _shown(value):
    """A config value as it would be typed on the command line."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    return "none" if value is None else str(value)


def train_parser(prog, description, config_cls, presets, default_preset, epilog=None):
    parser = _PresetParser(
        prog=prog, description=description, epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False,
    )
    parser.add_argument("-h", "--help", action=_HelpAfterParsing, help="show this help message and exit")
    parser.add_argument(
        "--preset", default=None, action=_PresetAction,
        help=f"starting values for every option ({', '.join(presets)}; default: {default_preset}); "
             "options given on the command line override them",
    )
    parser.set_defaults(default_preset=default_preset)
    parser.add_argument("--version", action="version", version=version_line())
    parser.add_argument("--out", default=None, help="run directory to create (default: runs/<track>-<timestamp>)")
    parser.add_argument(
        "--force", action="store_true",
        help="run even when the estimate from the config exceeds this machine (more memory than it has, "
             "or more than a day on a CPU), which is otherwise refused with the estimate")
    parser.add_argument(
        "--resume", default=None, metavar="RUN_DIR", type=run_directory_option,
        help="continue an interrupted run: finished models are skipped, the one in training "
             "resumes from its last epoch; the run's own config.json is used (of the other "
             f"options only {', '.join(option_name(name) for name in APPLIED_ON_RESUME)} may be given)",
    )
    add_config_options(parser, config_cls)
    parser.setup_preset_help(config_cls, presets)
    return parser


def package_version():
    """The package's version, read from residual_keras/_version.py without importing Keras."""
    origin = pathlib.Path(importlib.util.find_spec("residual_keras").origin).with_name("_version.py")
    for node in ast.parse(origin.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__version__":
            return node.value.value
    return "unknown"


def _installed(*distributions):
    """The version of the first of `distributions` installed (tensorflow also ships as tensorflow-cpu)."""
    for distribution in distributions:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "not installed"


def version_line():
    """'residual-keras 0.2.0 (keras 3.15.1, tensorflow 2.21.0)' for --version, from the installed metadata."""
    return (f"residual-keras {package_version()} (keras {_installed('keras')}, "
            f"tensorflow {_installed('tensorflow', 'tensorflow-cpu')})")


__all__ = ["APPLIED_ON_RESUME", "OneLineParser", "package_version", "train_parser", "version_line"]
