"""One vision experiment: build, compile, train and evaluate a grid point.

A grid point is (variant, depth). Every model of a run starts from the same
seed and sees the same batches in the same order (epoch e's batches depend on
the run seed and e only) with the same optimizer recipe, so the only
difference between `plain-56` and `residual-56` is the shortcut.
"""

import dataclasses
import time

import keras

from residual_keras import cifar_resnet, count_trainable_params, diagnostics
from tracks.common.instruments import dynamics_summary, jsonable
from tracks.common.training import fit_with_backup, throughput
from tracks.common.xla import xla_step_ran
from tracks.vision.optimizer import FixupSGD, fixup_groups
from tracks.vision.results import VisionModel
from tracks.vision.variants import VARIANTS

@dataclasses.dataclass(frozen=True)
class VisionSpec:
    variant: str
    depth: int

    @property
    def id(self):
        return f"{self.variant}-{self.depth}"

    @property
    def plain(self):
        """No block adds its input back (the instruments' c^l line)."""
        return VARIANTS[self.variant].plain

    @property
    def cost(self):
        """The training time relative to the grid's other models (for the time left)."""
        return self.depth


def grid(config):
    """The run's models: every variant at every depth, shallow to deep."""
    return [VisionSpec(variant, depth) for depth in sorted(config.depths) for variant in config.variants]


def uses_fixup_groups(config, spec):
    """True when the model trains with the official Fixup code's parameter groups (optimizer.py)."""
    return config.fixup_groups and VARIANTS[spec.variant].fixup


def build_model(spec, ctx):
    """The (uncompiled) ResNet of one grid point, for the run's data."""
    config = ctx.config
    return cifar_resnet(
        spec.depth,
        width=config.width,
        num_classes=ctx.data.num_classes,
        # With Fixup's groups the optimizer decays every parameter; no L2 penalty in the model too.
        weight_decay=0.0 if uses_fixup_groups(config, spec) else config.weight_decay,
        name=spec.id.replace("-", "_"),
        block=VARIANTS[spec.variant].block,
    )


def warmup_steps_for(config, spec, total_steps):
    """The steps of learning-rate warm-up this net gets: `warmup_steps` from `warmup_from_depth`, at most a quarter."""
    warmup = config.warmup_steps if spec.depth >= config.warmup_from_depth else 0
    return min(warmup, total_steps // 4)


def learning_rate_schedule(config, spec, total_steps):
    """Cosine decay to 0, or the paper's /10 steps at 50% and 75% of training.

    Warm-up (He et al. for ResNet-110): `warmup_steps_for` steps first, held
    at lr/10 (step schedule, as the paper) or rising linearly from lr/10 to lr
    (cosine schedule).
    """
    lr = config.learning_rate
    warmup = warmup_steps_for(config, spec, total_steps)
    if config.schedule == "step":
        boundaries = [int(total_steps * 0.5), int(total_steps * 0.75)]
        values = [lr, lr / 10, lr / 100]
        if warmup:
            boundaries, values = [warmup] + boundaries, [lr / 10] + values
        return keras.optimizers.schedules.PiecewiseConstantDecay(boundaries, values)
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=lr / 10 if warmup else lr,
        decay_steps=max(total_steps - warmup, 1),
        warmup_target=lr if warmup else None,
        warmup_steps=warmup,
        alpha=0.0,
    )


def build_optimizer(config, spec, model, total_steps):
    """SGD with momentum on `learning_rate_schedule`; Fixup's parameter groups where they apply.

    `config.gradient_clip` > 0 clips each step's gradient to that global norm
    (`global_clipnorm`; with FixupSGD, before its coupled decay is added).
    """
    schedule = learning_rate_schedule(config, spec, total_steps)
    clip = {"global_clipnorm": config.gradient_clip} if config.gradient_clip else {}
    if uses_fixup_groups(config, spec):
        slow_paths, decay_scales = fixup_groups(model)
        return FixupSGD(schedule, momentum=config.momentum, coupled_weight_decay=config.weight_decay,
                        slow_paths=slow_paths, decay_scales=decay_scales, **clip)
    return keras.optimizers.SGD(schedule, momentum=config.momentum, **clip)


def compile_model(model, config, spec, runtime, steps_per_epoch):
    model.compile(
        optimizer=build_optimizer(config, spec, model, steps_per_epoch * config.epochs),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=runtime.xla,
        steps_per_execution=runtime.steps_per_execution(config.steps_per_execution),
    )


def sample_indices(total, size, seed):
    """A fixed random subset of indices (image sets are often stored class by class)."""
    import numpy as np

    return np.sort(np.random.default_rng(seed).permutation(total)[:size])


def instrument_batch(ctx):
    """(x, y): the fixed batch of training images (normalised) and labels the instruments use."""
    config, data = ctx.config, ctx.data
    indices = sample_indices(len(data.y_train), config.instrument_images, config.seed)
    return data.normalize(data.x_train[indices]), data.y_train[indices]


def chance_on(labels):
    """The accuracy of the best constant guess on these labels (its largest class's share): what a net
    that learnt nothing can score on them. A few hundred test images are rarely balanced, and a net
    stuck at one class scores that class's share, which can lie well above one in `num_classes`."""
    import numpy as np

    labels = np.asarray(labels).reshape(-1).astype(int)
    return float(np.bincount(labels).max() / len(labels)) if len(labels) else None


def lesion_study(model, data, num_images, seed=0):
    """Veit et al. 2016: test accuracy with each single block removed (with `chance` on those `images`)."""
    indices = sample_indices(len(data.y_test), num_images, seed)
    x, y = data.x_test[indices], data.y_test[indices]
    study = diagnostics.lesion(model, (data.normalize(x), y), metric="accuracy", batch_size=250)
    return jsonable({**study, "chance": chance_on(y), "images": len(y)})


# Random sets of blocks removed per k, and test images whose gradient is split by path length.
DELETION_DRAWS = 5
PATH_IMAGES = 32


def ensemble_study(model, data, num_images, seed=0, plain=False):
    """Veit et al. 2016's other experiments on a trained model.

    Test accuracy with k random same-shape blocks removed (k = 1..n) and with
    each adjacent pair swapped, on the lesion images; for residual variants,
    the gradient at the first block's input carried by paths of each length
    (on `PATH_IMAGES` of them, with their true labels).
    """
    indices = sample_indices(len(data.y_test), num_images, seed)
    x, y = data.normalize(data.x_test[indices]), data.y_test[indices]
    deletion = diagnostics.delete_blocks(model, (x, y), draws=DELETION_DRAWS, batch_size=250, seed=seed)
    study = {
        "deletion": {**deletion, "chance": chance_on(y), "images": len(y)},
        "swaps": diagnostics.swap_blocks(model, (x, y), batch_size=250),
    }
    if not plain:  # a plain network has one path
        study["paths"] = diagnostics.path_gradients(model, x[:PATH_IMAGES], y[:PATH_IMAGES], seed=seed)
    return jsonable(study)


def landscape_study(model, data, config):
    """Li et al. 2018: the training loss on a plane of filter-normalised random directions."""
    indices = sample_indices(len(data.y_train), config.landscape_images, config.seed)
    return jsonable(diagnostics.loss_landscape(
        model, data.normalize(data.x_train[indices]), data.y_train[indices], steps=config.landscape_steps,
        seed=config.seed, batch_size=config.landscape_images))


def evaluation_datasets(ctx):
    """(curve_name, curve, test): the per-epoch evaluation set for the curves, its name, the test set.

    The curves use the val set if one is held out ("val"), else the test set
    ("test"); with `curve_eval_size`, a fixed random subset of it
    ("test_subset": test sets are often stored class by class, so the first
    images would all be one class).
    """
    from tracks.vision.data import evaluation_batches

    config, data = ctx.config, ctx.data
    test = evaluation_batches(data, data.x_test, data.y_test, config.batch_size)
    held_out = data.x_val is not None
    images, labels = (data.x_val, data.y_val) if held_out else (data.x_test, data.y_test)
    name = "val" if held_out else "test"
    if config.curve_eval_size and config.curve_eval_size < len(labels):
        chosen = sample_indices(len(labels), config.curve_eval_size, config.seed)
        images, labels = images[chosen], labels[chosen]
        name = "val" if held_out else "test_subset"
    return name, evaluation_batches(data, images, labels, config.batch_size), test


def train_one(spec, ctx):
    """Trains one grid point; its `VisionModel`.

    Every model of the run trains on the same epochs (epoch e's batches depend
    on (seed, e) only) and is evaluated on the same sets: made once per run.
    """
    from tracks.vision.data import training_epochs

    config, data, runtime, run, log = ctx.config, ctx.data, ctx.runtime, ctx.run, ctx.log
    epoch_data = ctx.shared("epochs", lambda: training_epochs(data, config.batch_size, augment=config.augment,
                                                              seed=config.seed))
    curve_name, curve_ds, test_ds = ctx.shared("evaluation", lambda: evaluation_datasets(ctx))
    num_train = len(data.y_train)
    steps_per_epoch = num_train // config.batch_size
    with runtime.strategy.scope():
        model = build_model(spec, ctx)
        compile_model(model, config, spec, runtime, steps_per_epoch)
    params = count_trainable_params(model)
    log(f"{spec.id}: {params:,} trainable parameters, {config.epochs} epochs x {steps_per_epoch} steps")
    x, y = instrument_batch(ctx)
    dynamics = diagnostics.TrainingDynamics(x, y, path=run.path / "dynamics" / f"{spec.id}.csv")
    start = time.perf_counter()
    outcome = fit_with_backup(
        model, epoch_data, run=run, model_id=spec.id, epochs=config.epochs,
        curve_data=curve_ds, curve_name=curve_name, extra_callbacks=[dynamics], log=log,
    )
    history = outcome["history"]
    diverged = outcome["diverged_epoch"]
    result = VisionModel(
        id=spec.id, variant=spec.variant, depth=spec.depth, params=params,
        num_classes=len(data.class_names),
        epochs_trained=len(history),
        diverged=diverged is not None,
        diverged_epoch=diverged,
        diverged_at=None if diverged is None else f"epoch {diverged + 1}",
        xla=xla_step_ran(model) if runtime.xla else False,
        images_per_second=throughput(history, steps_per_epoch * config.batch_size),
        dynamics_seconds=dynamics.seconds,
        dynamics=dynamics_summary(dynamics.read_csv(dynamics.path)),
        fit_seconds=outcome["seconds"],
        warmup_steps=warmup_steps_for(config, spec, steps_per_epoch * config.epochs),
    )
    if diverged is None and history:
        last = history[-1]
        result.train_error = 1.0 - last["accuracy"]
        result.train_errors = [round(1.0 - epoch["accuracy"], 6) for epoch in history]
        if "val_accuracy" in last and data.x_val is not None:
            result.val_error = 1.0 - last["val_accuracy"]
        test = model.evaluate(test_ds, verbose=0, return_dict=True)
        result.test_error = 1.0 - test["accuracy"]
        result.lesion = lesion_study(model, data, config.lesion_images, config.seed)
        result.ensemble = ensemble_study(model, data, config.lesion_images, config.seed, plain=spec.plain)
        if config.landscape_steps and spec.depth == max(config.depths):
            started = time.perf_counter()
            result.landscape = landscape_study(model, data, config)
            result.landscape_seconds = time.perf_counter() - started
            log(f"{spec.id}: loss landscape, {config.landscape_steps}x{config.landscape_steps} points on "
                f"{config.landscape_images} training images, in {result.landscape_seconds:.0f} s")
    result.seconds = time.perf_counter() - start
    return result
