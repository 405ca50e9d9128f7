"""`python -m tracks.language`: character Transformers, plain vs residual, Pre-LN vs Post-LN.

One command shows that residual connections make deep Transformers
trainable, that Pre-LN trains without warmup where Post-LN struggles (Xiong
et al. 2020), and that ReZero trains without normalisation; every model
writes a sample so you can read the difference.

    python -m tracks.language                            # the quick CPU preset
    python -m tracks.language --preset fast              # GPU: nanoGPT's 6x384
    python -m tracks.language --depths 2,6,12 --variants pre,post --warmup-steps 0,100
    python -m tracks.language --resume runs/language-20261130-101500
    python -m tracks.language sample RUN_DIR --prompt "ROMEO:"
    python -m tracks.language diagnose                   # instruments at initialisation, no training
    python -m tracks.language compare runs/language-... docs/reference/language-tinyshakespeare-s0   # a run beside the reference
    python -m tracks.language diagnose --model gpt.keras # the same instruments on your saved model
    python -m tracks.language prefetch                   # download Tiny Shakespeare for offline runs
"""

from tracks.common.console import log
from tracks.common.limits import Estimate
from tracks.common.track import GridModel, Track
from tracks.language.presets import CPU_XLA, PRESETS, LanguageConfig
from tracks.language.sample import check_prompt, sample_command

# The rate of the 4 x 128 baby GPT, tokens/s, behind the estimate printed before training;
# other models scale with depth x width^2. The figures' sources: docs/maintainers.md, "Timings the code assumes".
REFERENCE_TOKENS_PER_SECOND = {"cpu": 20000.0, "gpu": 400000.0}


class LanguageTrack(Track):
    name = "language"
    usage = __doc__
    config_cls = LanguageConfig
    presets = PRESETS
    diagnose_title = "Character Transformers at initialisation"
    instrument_examples = "validation windows"  # the batch the instruments read
    prefetch_dataset = "tiny_shakespeare"
    cpu_xla = CPU_XLA
    commands = {"sample": sample_command}

    # Data ---------------------------------------------------------------------

    def parse_source(self, text):
        from tracks.language.source import parse_source

        return parse_source(text)

    def load_data(self, config, source=None):
        from tracks.language.data import load_text_data

        return load_text_data(source or config.data, data_dir=config.data_dir, log=log,
                              sequence_length=config.sequence_length)

    @property
    def download_host(self):
        from tracks.language.data import TINY_SHAKESPEARE_HOST

        return TINY_SHAKESPEARE_HOST

    def fingerprint(self, data):
        from tracks.language.data import fingerprint

        return fingerprint(data)

    def check(self, config, data):
        check_prompt(data.vocab, config.prompt)
        windows = len(data.val_tokens) - config.sequence_length
        if windows < 1:
            raise ValueError(f"--sequence-length {config.sequence_length} is longer than the "
                             f"{len(data.val_tokens)} validation characters of {data.name}; lower it")
        if len(data.train_tokens) <= config.sequence_length:
            raise ValueError(f"--sequence-length {config.sequence_length} is longer than the "
                             f"{len(data.train_tokens)} training characters of {data.name}; lower it")

    def sample_limits(self, config, data):
        windows = len(data.val_tokens) - config.sequence_length
        where = f"validation windows of {config.sequence_length} characters in {data.name}"
        return [("lesion_sequences", windows, where), ("instrument_sequences", windows, where)]

    def banner(self, data):
        return "PYDOC FALLBACK DATA, NOT TINY SHAKESPEARE" if data.banner else None

    def data_title(self, name):
        from tracks.language.data import dataset_title

        return dataset_title(name)

    def describe_data(self, data):
        return (f"{data.name}: {len(data.train_tokens):,} training / {len(data.val_tokens):,} "
                f"validation characters, vocabulary {data.vocab.size}")

    # Models ---------------------------------------------------------------------

    def grid(self, config):
        from tracks.language import experiment

        return experiment.grid(config)

    def build_model(self, config, spec, data):
        from tracks.language import experiment

        return experiment.build_model(config, spec, data.vocab.size)

    def is_plain(self, spec):
        return spec.variant == "plain"

    def instrument_batch(self, config, data):
        from tracks.language import experiment

        return experiment.instrument_batch(config, data)

    def initial_models(self, config, data, specs):
        """One model per (variant, depth): warm-up changes training, not the model at initialisation."""
        import keras

        models, seen = [], set()
        for spec in specs:
            if (spec.variant, spec.depth) in seen:
                continue
            seen.add((spec.variant, spec.depth))
            keras.utils.set_random_seed(config.seed)
            models.append(GridModel(f"{spec.variant}-{spec.depth}", spec.variant, spec.depth,
                                    self.build_model(config, spec, data), self.is_plain(spec)))
        return models

    # Training ---------------------------------------------------------------------

    def estimate_seconds(self, config, data, specs, accelerator):
        return self._seconds(config, [spec.depth for spec in specs], accelerator)

    def _seconds(self, config, depths, accelerator):
        rate = REFERENCE_TOKENS_PER_SECOND["gpu" if accelerator else "cpu"]
        tokens = config.steps * config.batch_size * config.sequence_length
        cost = sum((depth / 4) * (config.embed_dim / 128) ** 2 for depth in depths)
        return tokens * cost / rate * 1.15 + 60  # evaluation, samples; instruments at init

    def resources(self, config):
        compared = config.variants if config.warmup_variants is None else config.warmup_variants
        per_depth = sum(1 for warmup in config.warmup_steps for variant in config.variants
                        if variant in compared or warmup == max(config.warmup_steps))
        depth, width, length = max(config.depths), config.embed_dim, config.sequence_length
        # A block: 12 width^2 weights (attention 4, MLP 8); it keeps about 16 floats a token and width
        # (LayerNorms, q, k, v, MLP) and heads x length attention scores a token for the backward pass.
        weights = depth * 12 * width**2 + (256 + length) * width
        activations = depth * length * (16 * width + 2 * config.num_heads * length)
        return Estimate(
            data_bytes=0,  # the texts are a few MB
            model_bytes=4 * (4 * weights + config.batch_size * activations),  # + gradients, AdamW's 2 slots
            cpu_seconds=self._seconds(config, [d for d in config.depths for _ in range(per_depth)], False)
            * max(1, len(config.seeds)),
        )

    def cost(self, spec):
        return spec.depth + 2  # embedding and head cost about two blocks

    def run_fields(self, config, data):
        from tracks.language import experiment

        return {"vocab_size": data.vocab.size, "unknown_val_chars": data.unknown_val_chars,
                "unigram_loss": experiment.unigram_loss(data)}

    def trainer(self, config, run, data, runtime):
        from tracks.language import experiment

        data.vocab.save(run.path / "vocab.json")
        return lambda spec: experiment.train_one(config, spec, runtime, data, run, log)

    # The report ----------------------------------------------------------------------

    def subtitle(self, config, data):
        from tracks.language import report

        return report.run_subtitle(config, data)

    def write_report(self, run, config, results, data):
        from tracks.language import report

        from tracks.common import instruments

        figures = [("Validation loss", "loss_curves.png")]
        banner, subtitle = self.banner(data), report.run_subtitle(config, data)
        report.plot_loss_curves(run, config, results, run.path / "loss_curves.png", banner, subtitle)
        figures += instruments.instrument_figures(run.path)
        if report.plot_stream(config, results, run.path / "stream.png", banner, subtitle):
            figures.append(("The residual stream after training", "stream.png"))
        figures += report.plot_trained_instruments(config, results, run.path, banner, subtitle)
        report.write_samples(run, config, results)
        report.write_summary(run, config, results, figures, data.banner)

    def results_table(self, results):
        from tracks.language import report

        return report.results_table(results)

    def terminal_ending(self, run, results):
        from tracks.language import report

        return report.terminal_ending(run, results)

    def write_seeds_report(self, run, config, seed_runs, data):
        from tracks.language import report

        return report.write_seeds_report(run, config, seed_runs, banner=data.banner, plot_banner=self.banner(data))

    def seeds_terminal_ending(self, run, results):
        from tracks.language import report

        return report.seeds_terminal_ending(run, results)

    def comparison_figures(self, results):
        from tracks.language import report

        return report.comparison_figures(results)

    def findings(self, results, config):
        from tracks.language.findings import language_findings

        return language_findings(results, config.get("variants") or ())


TRACK = LanguageTrack()
