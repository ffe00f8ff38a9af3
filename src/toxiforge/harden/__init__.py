"""``toxiforge harden``: attack a classifier with ALICE, retrain on what fooled it, repeat (docs/harden.md).

* :mod:`~toxiforge.harden.config` -- :class:`AttackPlan` and :class:`HardenConfig`, the loop's settings;
* :mod:`~toxiforge.harden.loop` -- :class:`Harden`, the rounds: what each round attacks, adds, trains and checks;
* :mod:`~toxiforge.harden.steps` -- the steps a round strings together, each skipped when done (``--resume``), and the
  run folder's layout;
* :mod:`~toxiforge.harden.data` -- which statements join training (validated by :mod:`toxiforge.attacks.validation`);
* :mod:`~toxiforge.harden.sets` -- prompts and statements kept apart across a run's generated sets;
* :mod:`~toxiforge.harden.inputs` -- ``--data`` and ``--eval`` read, and kept apart;
* :mod:`~toxiforge.harden.recipe` -- C_0's whole recipe, repeated by every round;
* :mod:`~toxiforge.harden.guard` -- the run's settings, a round that got worse;
* :mod:`~toxiforge.harden.report` -- the measurements of a round and ``report.md/json/png``;
* :mod:`~toxiforge.harden.seeds` -- ``toxiforge harden-seeds``: runs with other seeds read together.
"""
