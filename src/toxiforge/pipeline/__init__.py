"""Generation jobs: a plan (groups × labels × statements per cell) run by a decoder into sharded files."""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "JobConfig": "job:JobConfig", "JobResult": "job:JobResult", "check_output_dir": "job:check_output_dir",
    "run_generation": "job:run_generation",
    "Cell": "plan:Cell", "GenerationPlan": "plan:GenerationPlan", "WorkItem": "plan:WorkItem",
    "row_seed": "plan:row_seed",
})
